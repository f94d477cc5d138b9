// ShmHandle: a process's /dev/shm sampled through a held descriptor, and nothing once the process
// has exited (the descriptor alone would go on reading the tmpfs).
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "oci/container.hpp"
#include "shm/shm_sampler.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(ShmHandle, SamplesWhatThePathShows) {
  const ShmHandle h(::getpid());
  const auto by_handle = h.sample();
  const auto by_path = shm_usage_of_pid(::getpid());
  ASSERT_TRUE(by_handle);
  ASSERT_TRUE(by_path);
  EXPECT_EQ(by_handle->size, by_path->size);
}

TEST(ShmHandle, NothingOnceTheProcessHasExited) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const ShmHandle h(child);
  EXPECT_TRUE(h.sample());
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(h.sample());
  EXPECT_FALSE(ShmHandle(child).sample());  // a pid that is gone: no descriptor, no sample
}

// A child chrooted into `root` that waits there until the test ends (killed and reaped then).
struct ChrootedChild {
  pid_t pid = -1;
  bool chrooted = false;

  explicit ChrootedChild(const std::filesystem::path& root) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      const char ok = ::chroot(root.c_str()) == 0 ? 'y' : 'n';
      if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
      ::pause();
      ::_exit(0);
    }
    char ok = 0;
    chrooted = pid > 0 && ::read(ready[0], &ok, 1) == 1 && ok == 'y';
    ::close(ready[0]);
    ::close(ready[1]);
  }
  ~ChrootedChild() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  ChrootedChild(const ChrootedChild&) = delete;
  ChrootedChild& operator=(const ChrootedChild&) = delete;
};

// An image whose /dev/shm is an absolute symlink: opened through /proc/PID/root it would resolve
// on the host (here, the host's /), so the guard would sample a host directory. Nothing instead.
TEST(ShmHandle, NeverFollowsASymlinkedDevShmOutOfTheContainer) {
  SKIP_UNLESS(::geteuid() == 0, "needs root to chroot (CI runs as root)");
  test::TempDir root;
  std::filesystem::create_directories(root.path() / "dev");
  std::filesystem::create_symlink("/", root.path() / "dev" / "shm");
  const ChrootedChild child(root.path());
  ASSERT_TRUE(child.chrooted);
  EXPECT_FALSE(shm_usage_of_pid(child.pid));
  EXPECT_FALSE(ShmHandle(child.pid).sample());
}

// A /dev/shm with nothing mounted on it (a process in a chroot, a container being set up or torn
// down) is a directory of the disk below: its statvfs is the disk's. Nothing instead, or a
// --record of a job given 32m reports a peak of gigabytes.
TEST(ShmHandle, NothingWhenDevShmIsNotATmpfs) {
  SKIP_UNLESS(::geteuid() == 0, "needs root to chroot (CI runs as root)");
  test::TempDir root;
  std::filesystem::create_directories(root.path() / "dev" / "shm");
  struct statfs fs {};
  ASSERT_EQ(::statfs((root.path() / "dev" / "shm").c_str(), &fs), 0);
  SKIP_UNLESS(fs.f_type != TMPFS_MAGIC, "the test's temporary directory is itself on a tmpfs");
  const ChrootedChild child(root.path());
  ASSERT_TRUE(child.chrooted);
  EXPECT_FALSE(shm_usage_of_pid(child.pid));
  EXPECT_FALSE(ShmHandle(child.pid).sample());
  SamplerOptions once;
  once.stop = [n = 0]() mutable { return n++ > 0; };
  EXPECT_EQ(sample_shm_of_pid(child.pid, once).peak, 0u);
}

// The wrapper's sampler finds a container's process as soon as the engine reports it, which may be
// before its /dev/shm is mounted (the stand-in engine of tests/profiles/schema_test.sh mounts it
// after): a /dev/shm mounted later is the one sampled, not the host's it saw first.
TEST(ShmSampler, SeesADevShmMountedAfterTheProcessWasFound) {
  SKIP_UNLESS(::geteuid() == 0, "needs root to mount a tmpfs (CI runs as root)");
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 'n';
    if (::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) c = 'y';
    if (::write(ready[1], &c, 1) != 1 || ::read(go[0], &c, 1) != 1) ::_exit(1);
    c = ::mount("shm", "/dev/shm", "tmpfs", 0, "size=5m") == 0 ? 'm' : 'f';
    if (::write(ready[1], &c, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  SamplerOptions o;
  o.interval = std::chrono::milliseconds(1);
  int n = 0;
  bool mounted = false;
  o.stop = [&] { return n >= 200; };
  o.on_sample = [&](const ShmUsage& u, const ShmSampleStats&) {
    if (++n == 1) {
      char m = 'g';
      mounted = ::write(go[1], &m, 1) == 1 && ::read(ready[0], &m, 1) == 1 && m == 'm';
    }
    if (mounted && u.size == 5u << 20) n = 200;
  };
  const ShmSampleStats stats = sample_shm_of_pid(child, o);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  ASSERT_TRUE(mounted);
  EXPECT_EQ(stats.size, 5u << 20);
}

}  // namespace
}  // namespace gpurun
