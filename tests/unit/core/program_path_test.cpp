#include "base/program_path.hpp"

#include <gtest/gtest.h>

namespace gpurun {
namespace {

TEST(ProgramPathTest, TheRunningProgramAndItsDirectory) {
  const std::filesystem::path self = program_path();
  EXPECT_TRUE(self.is_absolute()) << self;
  EXPECT_EQ(self.filename(), "gpu_run_core_tests");
  EXPECT_EQ(program_dir(), self.parent_path());
}

TEST(ProgramPathTest, TheHookIsTheConfiguredOneOrTheOneBesideTheProgram) {
  EXPECT_EQ(hook_program_path("/opt/x/gpu-run-hook"), std::filesystem::path("/opt/x/gpu-run-hook"));
  EXPECT_EQ(hook_program_path({}), program_dir() / "gpu-run-hook");
}

}  // namespace
}  // namespace gpurun
