#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/error.hpp"

namespace gpurun {

// The message of the gpurun::Error that `f` throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The gpurun::Error that `f` throws; a test failure (and Error("none")) when it throws none.
template <typename F>
Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected gpurun::Error";
  return Error("none");
}

// True where nothing may be skipped: GPU_RUN_REQUIRE_INTEGRATION=1, which scripts/test (CI) sets,
// as for the integration tests.
inline bool skips_fail() {
  const char* v = std::getenv("GPU_RUN_REQUIRE_INTEGRATION");
  return v && std::string(v) == "1";
}

}  // namespace gpurun

// Skips the test with `why` when `condition` is false (no root, a component missing), or fails
// it where nothing may be skipped (skips_fail: CI). In a test body or a fixture's SetUp.
#define SKIP_UNLESS(condition, why)                                                              \
  if (!(condition)) {                                                                            \
    if (::gpurun::skips_fail()) FAIL() << "cannot run (GPU_RUN_REQUIRE_INTEGRATION=1): " << why; \
    GTEST_SKIP() << why;                                                                         \
  }

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)
#define EXPECT_NOT_CONTAINS(haystack, needle) \
  EXPECT_EQ(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)
