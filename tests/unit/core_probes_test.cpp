// The probes core shares between the hook, gpu-run and gpu-run-ctl doctor: read_kernel_file
// (core/host.hpp).

#include <gtest/gtest.h>

#include <string>

#include "host.hpp"
#include "temp_dir.hpp"
#include "test_util.hpp"

namespace gpurun {
namespace {

TEST(ReadKernelFile, TrimsTheTrailingNewlineAndSpaces) {
  test::TempDir dir;
  EXPECT_EQ(read_kernel_file(dir.write("shmmax", "18446744073692774399\n")), "18446744073692774399");
  EXPECT_EQ(read_kernel_file(dir.write("cpu.max", "max 100000 \n\n")), "max 100000");
  EXPECT_EQ(read_kernel_file(dir.write("meminfo", "MemTotal: 1 kB\nMemFree: 2 kB\n")), "MemTotal: 1 kB\nMemFree: 2 kB");
  EXPECT_EQ(read_kernel_file(dir.write("empty", "")), "");
}

TEST(ReadKernelFile, NothingWhenMissingUnreadableOrLarge) {
  test::TempDir dir;
  EXPECT_EQ(read_kernel_file(dir / "none"), std::nullopt);
  EXPECT_EQ(read_kernel_file(dir.path()), std::nullopt) << "a directory";
  EXPECT_EQ(read_kernel_file(dir.write("big", std::string(64 * 1024 + 1, '1'))), std::nullopt);
  EXPECT_EQ(read_kernel_file(dir.write("fits", std::string(64 * 1024, '1')))->size(), 64u * 1024);
}

TEST(ReadKernelFile, ReadsProcFiles) {
  const auto status = read_kernel_file("/proc/self/status");
  ASSERT_TRUE(status);
  EXPECT_CONTAINS(*status, "Cpus_allowed_list:");
}

}  // namespace
}  // namespace gpurun
