#include "shm/shm_mount.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

// Each test runs in a private mount namespace of its own process (ctest runs every
// test in a separate process), so no mount leaks to the host.
class ShmMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_UNLESS(::geteuid() == 0, "needs root to mount tmpfs (CI runs as root)");
    ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << std::strerror(errno);
    root_ = dir_.path() / "rootfs";
    fs::create_directories(root_ / "dev");
  }
  void TearDown() override {
    if (::geteuid() == 0) {
      ::umount2((root_ / "dev/shm").c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
      ::umount2((root_ / "dev").c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    }
  }
  void mount_tmpfs(const fs::path& where, const std::string& opts) {
    fs::create_directories(where);
    ASSERT_EQ(::mount("shm", where.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts.c_str()), 0)
        << where << ": " << std::strerror(errno);
  }
  std::uint64_t size_of(const fs::path& p) {
    struct statvfs st {};
    EXPECT_EQ(::statvfs(p.c_str(), &st), 0);
    return static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
  }
  ShmTarget target(std::uint64_t size, bool shrink = false) {
    ShmTarget t;
    t.rootfs = root_;
    t.size = size;
    t.allow_shrink = shrink;
    t.host_shm_dev = host_shm_device();
    return t;
  }

  test::TempDir dir_;
  fs::path root_;
};

TEST_F(ShmMountTest, GrowsATmpfsAndKeepsItsFlags) {
  mount_tmpfs(root_ / "dev", "mode=755");
  mount_tmpfs(root_ / "dev/shm", "size=64m,mode=1777");
  ShmResult r = apply_shm(target(300 * kMiB));
  EXPECT_EQ(r.outcome, ShmOutcome::kResized);
  EXPECT_EQ(r.before, 64 * kMiB);
  EXPECT_EQ(r.after, 300 * kMiB);
  EXPECT_EQ(size_of(root_ / "dev/shm"), 300 * kMiB);
  struct statvfs st {};
  ASSERT_EQ(::statvfs((root_ / "dev/shm").c_str(), &st), 0);
  EXPECT_TRUE(st.f_flag & ST_NOSUID);
  EXPECT_TRUE(st.f_flag & ST_NODEV);
  EXPECT_TRUE(st.f_flag & ST_NOEXEC);
}

TEST_F(ShmMountTest, GrowOnlyUnlessExplicit) {
  mount_tmpfs(root_ / "dev", "mode=755");
  mount_tmpfs(root_ / "dev/shm", "size=512m");
  EXPECT_EQ(apply_shm(target(128 * kMiB)).outcome, ShmOutcome::kUnchanged);
  EXPECT_EQ(size_of(root_ / "dev/shm"), 512 * kMiB);
  EXPECT_EQ(apply_shm(target(128 * kMiB, true)).outcome, ShmOutcome::kResized);
  EXPECT_EQ(size_of(root_ / "dev/shm"), 128 * kMiB);
}

TEST_F(ShmMountTest, MountsANewTmpfsInATmpfsDev) {
  mount_tmpfs(root_ / "dev", "mode=755");
  ShmResult r = apply_shm(target(200 * kMiB));
  EXPECT_EQ(r.outcome, ShmOutcome::kMounted);
  EXPECT_EQ(size_of(root_ / "dev/shm"), 200 * kMiB);
  struct stat st {};
  ASSERT_EQ(::stat((root_ / "dev/shm").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
}

TEST_F(ShmMountTest, RefusesToMountIntoTheImage) {
  fs::create_directories(root_ / "dev/shm");  // plain directories of the image, no tmpfs
  try {
    apply_shm(target(200 * kMiB));
    FAIL() << "mounted into the image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a tmpfs"), std::string::npos) << e.what();
  }
}

TEST_F(ShmMountTest, RefusesSymlinkedShm) {
  mount_tmpfs(root_ / "dev", "mode=755");
  fs::create_directory_symlink("/", root_ / "dev/shm");
  try {
    apply_shm(target(200 * kMiB));
    FAIL() << "followed a symlink";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symlink"), std::string::npos) << e.what();
  }
}

TEST_F(ShmMountTest, RefusesSymlinkedDev) {
  fs::remove(root_ / "dev");
  fs::create_directories(root_ / "elsewhere");
  mount_tmpfs(root_ / "elsewhere", "mode=755");
  mount_tmpfs(root_ / "elsewhere/shm", "size=64m");
  fs::create_directory_symlink("/elsewhere", root_ / "dev");
  try {
    apply_shm(target(200 * kMiB));
    FAIL() << "followed /dev";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev in the image is a symlink"), std::string::npos) << e.what();
  }
  EXPECT_EQ(size_of(root_ / "elsewhere/shm"), 64 * kMiB);
  ::umount2((root_ / "elsewhere/shm").c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  ::umount2((root_ / "elsewhere").c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
}

TEST_F(ShmMountTest, RefusesANonTmpfsMount) {
  mount_tmpfs(root_ / "dev", "mode=755");
  fs::create_directories(root_ / "dev/shm");
  fs::create_directories(dir_.path() / "data");
  ASSERT_EQ(::mount((dir_.path() / "data").c_str(), (root_ / "dev/shm").c_str(), nullptr, MS_BIND, nullptr), 0);
  try {
    apply_shm(target(200 * kMiB));
    FAIL() << "touched a bind mount of a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a tmpfs"), std::string::npos) << e.what();
  }
}

TEST_F(ShmMountTest, LeavesTheHostsShmAlone) {
  mount_tmpfs(root_ / "dev", "mode=755");
  fs::create_directories(root_ / "dev/shm");
  ASSERT_EQ(::mount("/dev/shm", (root_ / "dev/shm").c_str(), nullptr, MS_BIND, nullptr), 0);
  const std::uint64_t host_before = size_of("/dev/shm");
  ShmResult r = apply_shm(target(host_before + 64 * kMiB));
  EXPECT_EQ(r.outcome, ShmOutcome::kHostShm);
  EXPECT_EQ(size_of("/dev/shm"), host_before);
}

// resize_engine_shm: an engine's tmpfs where the engine mounted it on the host.
TEST_F(ShmMountTest, EngineShmGrowsOnTheHostGrowOnlyUnlessExplicit) {
  const fs::path shm = dir_.path() / "sandboxes/abc/shm";
  mount_tmpfs(shm, "size=64m,mode=1777");
  const auto r = resize_engine_shm(shm.string(), 300 * kMiB, false, host_shm_device());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ShmOutcome::kResized);
  EXPECT_EQ(r->before, 64 * kMiB);
  EXPECT_EQ(r->after, 300 * kMiB);
  EXPECT_EQ(size_of(shm), 300 * kMiB);
  const auto same = resize_engine_shm(shm.string(), 128 * kMiB, false, host_shm_device());
  ASSERT_TRUE(same);
  EXPECT_EQ(same->outcome, ShmOutcome::kUnchanged);
  EXPECT_EQ(size_of(shm), 300 * kMiB);
  EXPECT_EQ(resize_engine_shm(shm.string(), 128 * kMiB, true, host_shm_device())->outcome, ShmOutcome::kResized);
  EXPECT_EQ(size_of(shm), 128 * kMiB);
  ::umount2(shm.c_str(), MNT_DETACH);
}

TEST_F(ShmMountTest, EngineShmOnlyATmpfsMountOfItsOwnReachedWithoutSymlinks) {
  const fs::path run = dir_.path() / "run";
  mount_tmpfs(run, "size=32m");
  // A directory of a tmpfs (as /run is), not a mount: resizing would resize all of /run.
  fs::create_directories(run / "sandboxes/abc/shm");
  EXPECT_FALSE(resize_engine_shm((run / "sandboxes/abc/shm").string(), 300 * kMiB, true, host_shm_device()));
  EXPECT_EQ(size_of(run), 32 * kMiB);
  // A symlink on the way to a real tmpfs mount.
  mount_tmpfs(dir_.path() / "real/shm", "size=64m");
  fs::create_directories(dir_.path() / "via");
  fs::create_directory_symlink(dir_.path() / "real", dir_.path() / "via/link");
  EXPECT_FALSE(resize_engine_shm((dir_.path() / "via/link/shm").string(), 300 * kMiB, true, host_shm_device()));
  EXPECT_EQ(size_of(dir_.path() / "real/shm"), 64 * kMiB);
  // Not a tmpfs: a directory bound in.
  fs::create_directories(dir_.path() / "data");
  fs::create_directories(dir_.path() / "disk/shm");
  ASSERT_EQ(::mount((dir_.path() / "data").c_str(), (dir_.path() / "disk/shm").c_str(), nullptr, MS_BIND, nullptr), 0);
  EXPECT_FALSE(resize_engine_shm((dir_.path() / "disk/shm").string(), 300 * kMiB, true, host_shm_device()));
  // The host's /dev/shm bound somewhere else.
  fs::create_directories(dir_.path() / "host/shm");
  ASSERT_EQ(::mount("/dev/shm", (dir_.path() / "host/shm").c_str(), nullptr, MS_BIND, nullptr), 0);
  const std::uint64_t host_before = size_of("/dev/shm");
  EXPECT_FALSE(
      resize_engine_shm((dir_.path() / "host/shm").string(), host_before + 64 * kMiB, true, host_shm_device()));
  EXPECT_EQ(size_of("/dev/shm"), host_before);
  // Missing, relative, empty.
  EXPECT_FALSE(resize_engine_shm((dir_.path() / "nothing/shm").string(), kMiB, true, host_shm_device()));
  EXPECT_FALSE(resize_engine_shm("relative/shm", kMiB, true, host_shm_device()));
  EXPECT_FALSE(resize_engine_shm("", kMiB, true, host_shm_device()));
  for (const char* m : {"host/shm", "disk/shm", "real/shm", "run"}) ::umount2((dir_.path() / m).c_str(), MNT_DETACH);
}

// The one probe: a tmpfs, a plain directory, a symlink refused or followed in the root, none.
TEST_F(ShmMountTest, TheOneProbeSeesWhatTheContainerHas) {
  const UniqueFd root(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root);
  ShmProbe p = probe_shm_dir(root.get(), Resolve::kNoSymlinks, "test");
  EXPECT_EQ(p.error, ENOENT);
  fs::create_directories(root_ / "elsewhere");
  fs::create_directory_symlink("/elsewhere", root_ / "dev/shm");
  const int refused = probe_shm_dir(root.get(), Resolve::kNoSymlinks, "test").error;
  EXPECT_TRUE(refused == ELOOP || refused == ENOTDIR) << refused;   // not followed
  p = probe_shm_dir(root.get(), Resolve::kSymlinksInRoot, "test");  // resolved in the root, not the host's
  EXPECT_EQ(p.error, 0);
  EXPECT_EQ(p.mount, ShmMount::kNotMount);
  fs::remove(root_ / "dev/shm");
  mount_tmpfs(root_ / "dev/shm", "size=48m");
  p = probe_shm_dir(root.get(), Resolve::kNoSymlinks, "test");
  EXPECT_EQ(p.error, 0);
  EXPECT_EQ(p.mount, ShmMount::kTmpfs);
  EXPECT_EQ(p.fs.size(), 48 * kMiB);
}

// The one host-IPC test: this process is on its own namespace; a child in a new one is not.
TEST(HostIpcTest, ThisProcessSharesItsOwnNamespaceAndAChildInANewOneDoesNot) {
  SKIP_UNLESS(::geteuid() == 0, "needs root to unshare an IPC namespace (CI runs as root)");
  EXPECT_TRUE(in_host_ipc_namespace(std::to_string(::getpid()), "test"));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const char ok = ::unshare(CLONE_NEWIPC) == 0 ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  EXPECT_EQ(ok, 'y');
  EXPECT_FALSE(in_host_ipc_namespace(std::to_string(child), "test"));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_THROW(in_host_ipc_namespace("999999999", "test"), Error);
}

}  // namespace
}  // namespace gpurun
