#pragma once

#include <gtest/gtest.h>

#include <string>

#include "error.hpp"

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

}  // namespace gpurun

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)
#define EXPECT_NOT_CONTAINS(haystack, needle) \
  EXPECT_EQ(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)
