#include "base/env.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gpurun {
namespace {

TEST(EnvTest, ProcessEnvReadsTheEnvironment) {
  ::setenv("GPU_RUN_ENV_TEST", "x y", 1);
  EXPECT_EQ(process_env("GPU_RUN_ENV_TEST"), std::optional<std::string>("x y"));
  ::setenv("GPU_RUN_ENV_TEST", "", 1);
  EXPECT_EQ(process_env("GPU_RUN_ENV_TEST"), std::optional<std::string>(""));
  ::unsetenv("GPU_RUN_ENV_TEST");
  EXPECT_EQ(process_env("GPU_RUN_ENV_TEST"), std::nullopt);
}

}  // namespace
}  // namespace gpurun
