// The probes core shares between the hook's mount code and gpu-run-ctl doctor:
// open_dir_in_root, stat_fs, classify_shm (core/shm/shm_mount.hpp) and read_kernel_file
// (core/oci/host.hpp).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/units.hpp"
#include "oci/host.hpp"
#include "shm/shm_mount.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using test::TempDir;

ino_t inode_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  return st.st_ino;
}

ino_t inode_of(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
  return st.st_ino;
}

FsStat fake_fs(dev_t dev, long type) {
  FsStat f;
  f.st.st_dev = dev;
  f.sfs.f_type = type;
  return f;
}

TEST(ShmMountName, NamesEveryKind) {
  EXPECT_STREQ(shm_mount_name(ShmMount::kMissing), "missing");
  EXPECT_STREQ(shm_mount_name(ShmMount::kNotMount), "not-a-mount");
  EXPECT_STREQ(shm_mount_name(ShmMount::kNotTmpfs), "not-tmpfs");
  EXPECT_STREQ(shm_mount_name(ShmMount::kTmpfs), "tmpfs");
}

TEST(ClassifyShm, OnDevsOwnDeviceIsNotAMount) {
  EXPECT_EQ(classify_shm(fake_fs(7, TMPFS_MAGIC), dev_t{7}), ShmMount::kNotMount);
  EXPECT_EQ(classify_shm(fake_fs(7, EXT4_SUPER_MAGIC), dev_t{7}), ShmMount::kNotMount);
}

TEST(ClassifyShm, AMountOfItsOwnIsATmpfsOrNot) {
  EXPECT_EQ(classify_shm(fake_fs(8, TMPFS_MAGIC), dev_t{7}), ShmMount::kTmpfs);
  EXPECT_EQ(classify_shm(fake_fs(8, EXT4_SUPER_MAGIC), dev_t{7}), ShmMount::kNotTmpfs);
  EXPECT_EQ(classify_shm(fake_fs(8, RAMFS_MAGIC), dev_t{7}), ShmMount::kNotTmpfs);
}

TEST(ClassifyShm, WithoutDevsDeviceOnlyTheTypeCounts) {
  EXPECT_EQ(classify_shm(fake_fs(7, TMPFS_MAGIC), std::nullopt), ShmMount::kTmpfs);
  EXPECT_EQ(classify_shm(fake_fs(7, EXT4_SUPER_MAGIC), std::nullopt), ShmMount::kNotTmpfs);
}

TEST(FsStat, SizeAndUseFromStatvfs) {
  FsStat f;
  f.svfs.f_frsize = 4096;
  f.svfs.f_blocks = 16384;  // 64MiB
  f.svfs.f_bfree = 12288;
  EXPECT_EQ(f.size(), 64 * kMiB);
  EXPECT_EQ(f.used(), 16 * kMiB);
  f.sfs.f_type = TMPFS_MAGIC;
  EXPECT_TRUE(f.is_tmpfs());
  f.sfs.f_type = EXT4_SUPER_MAGIC;
  EXPECT_FALSE(f.is_tmpfs());
}

TEST(StatFs, ReadsTheOpenDirectory) {
  test::TempDir dir;
  UniqueFd fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  const FsStat f = stat_fs(fd.get(), "the temp dir");
  EXPECT_EQ(f.st.st_ino, inode_of(dir.path()));
  EXPECT_TRUE(S_ISDIR(f.st.st_mode));
  EXPECT_GT(f.size(), 0u);
}

TEST(StatFs, NamesWhatFailed) {
  const std::string message = error_of([] { stat_fs(-1, "/dev/shm of the test"); });
  EXPECT_CONTAINS(message, "stat /dev/shm of the test");
}

// A container-like tree: dev/shm with a file, dev/link -> /dev (absolute), dev/escape ->
// ../../.. (relative, past the root), a regular file, and a symlink to it.
class OpenDirInRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("rootfs/dev/shm/torch_1", "x");
    dir_.write("rootfs/dev/null-file", "");
    fs::create_directory_symlink("/dev", root() / "link");
    fs::create_directory_symlink("../../..", root() / "dev/escape");
    root_ = UniqueFd(::open(root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_);
  }
  fs::path root() const { return dir_.path() / "rootfs"; }

  test::TempDir dir_;
  UniqueFd root_;
};

TEST_F(OpenDirInRootTest, NoSymlinksOpensAPathFd) {
  UniqueFd dev(open_dir_in_root(root_.get(), "dev", Resolve::kNoSymlinks));
  ASSERT_TRUE(dev) << std::strerror(errno);
  EXPECT_EQ(inode_of(dev.get()), inode_of(root() / "dev"));
  EXPECT_TRUE(::fcntl(dev.get(), F_GETFL) & O_PATH);
  UniqueFd shm(open_dir_in_root(dev.get(), "shm", Resolve::kNoSymlinks));
  ASSERT_TRUE(shm);
  EXPECT_EQ(inode_of(shm.get()), inode_of(root() / "dev/shm"));
}

TEST_F(OpenDirInRootTest, NoSymlinksRefusesEverySymlink) {
  // The last component: O_NOFOLLOW names the link itself, which is not a directory.
  errno = 0;
  EXPECT_EQ(open_dir_in_root(root_.get(), "link", Resolve::kNoSymlinks), -1);
  EXPECT_TRUE(errno == ENOTDIR || errno == ELOOP) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(open_dir_in_root(root_.get(), "link/shm", Resolve::kNoSymlinks), -1);
  EXPECT_EQ(errno, ELOOP);
}

TEST_F(OpenDirInRootTest, SymlinksInRootResolveAsIfTheTreeWereSlash) {
  // /dev in the tree, not the host's.
  UniqueFd shm(open_dir_in_root(root_.get(), "link/shm", Resolve::kSymlinksInRoot));
  ASSERT_TRUE(shm) << std::strerror(errno);
  EXPECT_EQ(inode_of(shm.get()), inode_of(root() / "dev/shm"));
  // A readable fd (not O_PATH): the directory can be listed.
  EXPECT_FALSE(::fcntl(shm.get(), F_GETFL) & O_PATH);
  // Past the root is the root.
  UniqueFd escaped(open_dir_in_root(root_.get(), "dev/escape", Resolve::kSymlinksInRoot));
  ASSERT_TRUE(escaped) << std::strerror(errno);
  EXPECT_EQ(inode_of(escaped.get()), inode_of(root()));
  UniqueFd dotdot(open_dir_in_root(root_.get(), "../../..", Resolve::kSymlinksInRoot));
  ASSERT_TRUE(dotdot) << std::strerror(errno);
  EXPECT_EQ(inode_of(dotdot.get()), inode_of(root()));
}

// openat2's RESOLVE_IN_ROOT fails a ".." with EAGAIN when a rename or a mount anywhere on the
// host races the walk (openat2(2): "the caller may choose to retry"): a busy node's renames must
// not fail a container's start. A thread renames a file back and forth while ".." is resolved.
TEST_F(OpenDirInRootTest, DotDotHoldsWhileTheHostRenames) {
  std::atomic<bool> stop{false};
  const fs::path a = dir_.path() / "a", b = dir_.path() / "b";
  dir_.write("a", "");
  std::thread renamer([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      (void)::rename(a.c_str(), b.c_str());
      (void)::rename(b.c_str(), a.c_str());
    }
  });
  int failed = 0, last_errno = 0;
  for (int i = 0; i < 20000; ++i) {
    UniqueFd up(open_dir_in_root(root_.get(), "dev/escape", Resolve::kSymlinksInRoot));
    if (!up) ++failed, last_errno = errno;
  }
  stop = true;
  renamer.join();
  EXPECT_EQ(failed, 0) << "last: " << std::strerror(last_errno);
}

TEST_F(OpenDirInRootTest, MissingAndNotADirectory) {
  for (Resolve resolve : {Resolve::kNoSymlinks, Resolve::kSymlinksInRoot}) {
    errno = 0;
    EXPECT_EQ(open_dir_in_root(root_.get(), "dev/none", resolve), -1);
    EXPECT_EQ(errno, ENOENT);
    errno = 0;
    EXPECT_EQ(open_dir_in_root(root_.get(), "dev/null-file", resolve), -1);
    EXPECT_EQ(errno, ENOTDIR);
  }
}

// With a real tmpfs, in a private mount namespace of this test's process (ctest runs each test
// in a process of its own).
TEST(StatFs, TellsATmpfsMountFromADirectoryOfDev) {
  SKIP_UNLESS(::geteuid() == 0, "needs root to mount tmpfs (CI runs as root)");
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
  ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << std::strerror(errno);
  test::TempDir dir;
  fs::create_directories(dir / "dev");
  ASSERT_EQ(::mount("shm", (dir / "dev").c_str(), "tmpfs", 0, "size=1m"), 0) << std::strerror(errno);
  fs::create_directories(dir / "dev/shm");
  fs::create_directories(dir / "dev/plain");
  ASSERT_EQ(::mount("shm", (dir / "dev/shm").c_str(), "tmpfs", 0, "size=8m"), 0) << std::strerror(errno);
  UniqueFd root(::open(dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd dev(open_dir_in_root(root.get(), "dev", Resolve::kNoSymlinks));
  UniqueFd shm(open_dir_in_root(root.get(), "dev/shm", Resolve::kNoSymlinks));
  UniqueFd plain(open_dir_in_root(root.get(), "dev/plain", Resolve::kNoSymlinks));
  ASSERT_TRUE(dev && shm && plain);
  const FsStat dev_fs = stat_fs(dev.get(), "/dev");
  const FsStat shm_fs = stat_fs(shm.get(), "/dev/shm");
  EXPECT_TRUE(dev_fs.is_tmpfs());
  EXPECT_EQ(shm_fs.size(), 8 * kMiB);
  EXPECT_EQ(classify_shm(shm_fs, dev_fs.st.st_dev), ShmMount::kTmpfs);
  EXPECT_EQ(classify_shm(stat_fs(plain.get(), "/dev/plain"), dev_fs.st.st_dev), ShmMount::kNotMount);
  ::umount2((dir / "dev/shm").c_str(), MNT_DETACH);
  ::umount2((dir / "dev").c_str(), MNT_DETACH);
}

// read_kernel_file's text; nullopt when it has none.
std::optional<std::string> text_of(const fs::path& path) {
  const OrWhy<std::string> text = read_kernel_file(path);
  if (!text) return std::nullopt;
  return *text;
}

TEST(ReadKernelFile, TrimsTheTrailingNewlineAndSpaces) {
  test::TempDir dir;
  EXPECT_EQ(text_of(dir.write("shmmax", "18446744073692774399\n")), "18446744073692774399");
  EXPECT_EQ(text_of(dir.write("cpu.max", "max 100000 \n\n")), "max 100000");
  EXPECT_EQ(text_of(dir.write("meminfo", "MemTotal: 1 kB\nMemFree: 2 kB\n")), "MemTotal: 1 kB\nMemFree: 2 kB");
  EXPECT_EQ(text_of(dir.write("empty", "")), "");
}

TEST(ReadKernelFile, NothingWhenMissingUnreadableOrLarge) {
  test::TempDir dir;
  EXPECT_EQ(text_of(dir / "none"), std::nullopt);
  EXPECT_EQ(text_of(dir.path()), std::nullopt) << "a directory";
  EXPECT_EQ(text_of(dir.write("big", std::string(64 * 1024 + 1, '1'))), std::nullopt);
  EXPECT_EQ(text_of(dir.write("fits", std::string(64 * 1024, '1')))->size(), 64u * 1024);
}

TEST(ReadKernelFile, SaysWhyNotWithTheFileAndTheErrno) {
  test::TempDir dir;
  const OrWhy<std::string> missing = read_kernel_file(dir / "none");
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.why, (dir / "none").string() + ": open: " + std::strerror(ENOENT));
  const OrWhy<std::string> directory = read_kernel_file(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_CONTAINS(directory.why, dir.path().string() + ": read: " + std::strerror(EISDIR));
  const OrWhy<std::string> big = read_kernel_file(dir.write("big", std::string(64 * 1024 + 1, '1')));
  ASSERT_FALSE(big);
  EXPECT_CONTAINS(big.why, "more than 65536 bytes");
}

TEST(ReadKernelFile, ReadsProcFiles) {
  const auto status = read_kernel_file("/proc/self/status");
  ASSERT_TRUE(status);
  EXPECT_CONTAINS(*status, "Cpus_allowed_list:");
}

}  // namespace
}  // namespace gpurun
