#include "base/error.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace gpurun {
namespace {

TEST(Error, FailuresDefaultToOneAndUsageErrorsAreTwo) {
  EXPECT_EQ(Error("disk on fire").exit_code(), kExitFailure);
  EXPECT_EQ(Error("disk on fire", EIO).errno_value(), EIO);
  EXPECT_EQ(usage_error("--gpus 0x: not a count").exit_code(), kExitUsage);
  EXPECT_EQ(usage_error("profile x: cannot open", ENOENT).errno_value(), ENOENT);
  EXPECT_EQ(system_error("read /x", EIO).exit_code(), kExitFailure);
  EXPECT_STREQ(system_error("read /x", EIO).what(), "read /x: Input/output error");
}

TEST(Error, ContextKeepsTheErrnoAndTheExitCode) {
  const Error failure = system_error("read /x", EIO).with_context("load profile p");
  EXPECT_STREQ(failure.what(), "load profile p: read /x: Input/output error");
  EXPECT_EQ(failure.errno_value(), EIO);
  EXPECT_EQ(failure.exit_code(), kExitFailure);
  const Error usage = usage_error("unknown profile 'x'", ENOENT).with_context("--profile");
  EXPECT_EQ(usage.errno_value(), ENOENT);
  EXPECT_EQ(usage.exit_code(), kExitUsage);
}

TEST(Error, AHintAndAnExitCodeKeepTheRest) {
  const Error hinted = system_error("write /etc/x", EACCES).with_hint(" (run as root)");
  EXPECT_STREQ(hinted.what(), "write /etc/x: Permission denied (run as root)");
  EXPECT_EQ(hinted.errno_value(), EACCES);
  EXPECT_EQ(hinted.exit_code(), kExitFailure);
  const Error usage = system_error("read /x", ELOOP).with_exit_code(kExitUsage);
  EXPECT_STREQ(usage.what(), "read /x: Too many levels of symbolic links");
  EXPECT_EQ(usage.errno_value(), ELOOP);
  EXPECT_EQ(usage.exit_code(), kExitUsage);
}

}  // namespace
}  // namespace gpurun
