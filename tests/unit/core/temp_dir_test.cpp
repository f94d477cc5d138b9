#include "base/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

namespace gpurun {
namespace {

TEST(TempDirTest, IsPrivateNamedByItsPrefixAndRemovesItself) {
  fs::path path;
  {
    const gpurun::TempDir dir("gpu-run-temp-dir-test");
    path = dir.path();
    EXPECT_EQ(path.filename().string().rfind("gpu-run-temp-dir-test.", 0), 0u) << path;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    fs::create_directories(dir / "a" / "b");
    std::ofstream(dir / "a" / "b" / "f") << "x";
    // An unreadable directory inside does not stop the removal.
    fs::permissions(dir / "a", fs::perms::none);
  }
  std::error_code ec;
  EXPECT_FALSE(fs::exists(path, ec)) << path;
}

}  // namespace
}  // namespace gpurun
