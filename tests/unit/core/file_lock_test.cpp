#include "base/file_lock.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "base/error.hpp"
#include "base/temp_dir.hpp"

namespace gpurun {
namespace {

TEST(FileLockTest, ExcludesASecondHolderUntilTheFirstIsGone) {
  TempDir dir;
  const std::string path = (dir.path() / "locks" / "c.lock").string();
  auto first = std::make_unique<FileLock>(path, true);
  EXPECT_TRUE(first->locked());
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "locks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // flock locks belong to the open file description: a second open in this process conflicts.
  FileLock second(path, false);
  EXPECT_FALSE(second.locked());
  first.reset();
  FileLock third(path, false);
  EXPECT_TRUE(third.locked());
}

TEST(FileLockTest, WaitTakesTheLockOnceFree) {
  TempDir dir;
  const std::string path = (dir.path() / "c.lock").string();
  FileLock later(path, false);
  EXPECT_TRUE(later.locked());
  later.wait();  // already held: returns at once
  EXPECT_TRUE(later.locked());
}

TEST(FileLockTest, RemovesItsFileWhenReleasedAndAWaiterLocksTheNewOne) {
  TempDir dir;
  const std::string path = (dir.path() / "c.lock").string();
  auto first = std::make_unique<FileLock>(path, true);
  FileLock waiter(path, false);  // opened the file the first holds
  ASSERT_FALSE(waiter.locked());
  first.reset();
  EXPECT_FALSE(std::filesystem::exists(path)) << "the released lock file stays behind";
  // The waiter gets the flock on the removed file, sees that the path no longer names it, and
  // locks a new file at the path: a third process must not get it meanwhile.
  waiter.wait();
  EXPECT_TRUE(waiter.locked());
  ASSERT_TRUE(std::filesystem::exists(path));
  FileLock third(path, false);
  EXPECT_FALSE(third.locked());
}

TEST(FileLockTest, NamesThePathItCannotCreate) {
  TempDir dir;
  const std::string file = (dir.path() / "f").string();
  std::ofstream(file) << "a regular file";
  try {
    FileLock bad(file + "/under-a-file.lock", true);
    ADD_FAILURE() << "locked under a regular file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST(FileLockTest, OneLockPerContainerIdUnderRun) {
  EXPECT_EQ(shm_lock_path("3f2a"), "/run/gpu-run/resize/3f2a.lock");
  EXPECT_EQ(shm_lock_path(std::string(100, 'a')), "/run/gpu-run/resize/" + std::string(64, 'a') + ".lock");
}

}  // namespace
}  // namespace gpurun
