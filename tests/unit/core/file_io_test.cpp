#include "file_io.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test_files.hpp"
#include "test_util.hpp"

namespace gpurun {
namespace {

using test::TempDir;

TEST(ReadSmallFile, Limits) {
  TempDir d;
  fs::path f = d.write("x", "12345");
  EXPECT_EQ(read_small_file(f, 5, "thing"), "12345");
  std::string m = error_of([&] { read_small_file(f, 4, "thing"); });
  EXPECT_EQ(m.rfind("thing " + f.string(), 0), 0u) << m;
  EXPECT_CONTAINS(m, "larger than 4 bytes");
}

}  // namespace
}  // namespace gpurun
