// The hook's confinement: the build-time seccomp program matches the policy, and a process
// that installs it can do its job's syscalls and nothing else.
#include "oci/sandbox.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "support/test_util.hpp"
#include "tools/seccomp_export.hpp"

namespace gpurun {
namespace {

TEST(Sandbox, BuiltFilterIsWhatLibseccompMakesOfThePolicy) {
  const std::vector<sock_filter> expected = export_hook_filter();
  ASSERT_GT(expected.size(), 10u);
  ASSERT_EQ(hook_filter_length(), expected.size());
  EXPECT_EQ(std::memcmp(hook_filter_data(), expected.data(), expected.size() * sizeof(sock_filter)), 0);
}

// Runs `body` in a child after install_seccomp(); the child's exit code is body's result.
int in_confined_child(int (*body)()) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(100);
    try {
      install_seccomp();
    } catch (...) {
      ::_exit(101);
    }
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

TEST(Sandbox, ConfinedProcessCanReadAndStatButNotMore) {
  EXPECT_EQ(in_confined_child([] {
              char buf[16];
              int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
              if (fd < 0 || ::read(fd, buf, sizeof buf) <= 0 || ::close(fd) != 0) return 1;
              return ::getpid() > 0 ? 0 : 2;
            }),
            0);
  // Refused with EPERM, not killed: the hook reports it like any other failure.
  EXPECT_EQ(in_confined_child([] { return ::socket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EPERM ? 0 : 1; }), 0);
  EXPECT_EQ(in_confined_child([] { return ::unshare(CLONE_NEWNS) == -1 && errno == EPERM ? 0 : 1; }), 0);
  EXPECT_EQ(in_confined_child([] { return ::chmod("/nonexistent", 0777) == -1 && errno == EPERM ? 0 : 1; }), 0);
  EXPECT_EQ(in_confined_child([] { return ::fork() == -1 && errno == EPERM ? 0 : 1; }), 0);
  EXPECT_EQ(in_confined_child([] { return ::kill(1, 0) == -1 && errno == EPERM ? 0 : 1; }), 0);
}

// The capability sets of this process from /proc/self/status ("CapBnd" etc.), as masks.
std::uint64_t cap_mask(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return ~0ull;
  char line[256];
  std::uint64_t mask = ~0ull;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') mask = std::strtoull(line + n + 1, nullptr, 16);
  std::fclose(f);
  return mask;
}

TEST(Sandbox, DropsEveryCapabilityButTheHooksFour) {
  SKIP_UNLESS(::geteuid() == 0, "needs root: dropping capabilities from a full set");
  pid_t pid = ::fork();
  if (pid == 0) {
    try {
      drop_capabilities();
    } catch (...) {
      ::_exit(10);
    }
    const std::uint64_t keep =
        (1ull << CAP_SYS_ADMIN) | (1ull << CAP_SYS_CHROOT) | (1ull << CAP_SYS_PTRACE) | (1ull << CAP_DAC_OVERRIDE);
    if (cap_mask("CapEff") != keep) ::_exit(11);
    if (cap_mask("CapPrm") != keep) ::_exit(12);
    if (cap_mask("CapBnd") != keep) ::_exit(13);
    if (cap_mask("CapAmb") != 0) ::_exit(14);
    if (cap_mask("NoNewPrivs") != 1) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 = drop failed, 11-15 = CapEff, CapPrm, CapBnd, CapAmb, NoNewPrivs wrong";
}

}  // namespace
}  // namespace gpurun
