#include "sandbox.hpp"

#include <seccomp.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include <cerrno>
#include <memory>

#include "error.hpp"

namespace gpurun {
namespace {

constexpr cap_value_t kKeep[] = {CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_SYS_PTRACE, CAP_DAC_OVERRIDE};

struct CapFree {
  void operator()(cap_t c) const { cap_free(c); }
};
using CapGuard = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

struct SeccompRelease {
  void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};
using SeccompGuard = std::unique_ptr<void, SeccompRelease>;

bool kept(cap_value_t cap) {
  for (cap_value_t k : kKeep)
    if (k == cap) return true;
  return false;
}

}  // namespace

void drop_capabilities() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw system_error("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  // The bounding set can only shrink while CAP_SETPCAP is still effective.
  for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (kept(cap) || !CAP_IS_SUPPORTED(cap)) continue;
    if (cap_drop_bound(cap) != 0 && errno != EINVAL && errno != EPERM)
      throw system_error("drop capability from the bounding set", errno);
  }
  if (cap_reset_ambient() != 0 && errno != EINVAL) throw system_error("clear ambient capabilities", errno);
  CapGuard caps(cap_init());
  if (!caps) throw system_error("cap_init", errno);
  const int n = static_cast<int>(sizeof kKeep / sizeof kKeep[0]);
  if (cap_set_flag(caps.get(), CAP_PERMITTED, n, kKeep, CAP_SET) != 0 ||
      cap_set_flag(caps.get(), CAP_EFFECTIVE, n, kKeep, CAP_SET) != 0)
    throw system_error("cap_set_flag", errno);
  if (cap_set_proc(caps.get()) != 0) throw system_error("drop capabilities (cap_set_proc)", errno);
}

void install_seccomp() {
  SeccompGuard ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (!ctx) throw Error("seccomp_init failed", 0, kExitFailure);
  static const char* const kAllowed[] = {
      // memory, threads' basics, exit
      "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "futex", "exit", "exit_group",
      "rt_sigreturn", "rt_sigaction", "rt_sigprocmask", "sigaltstack", "getpid", "gettid", "tgkill",
      "getrandom", "clock_gettime", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
      "sched_getaffinity", "sched_yield", "getuid", "geteuid", "getgid", "getegid", "uname", "prlimit64",
      "set_robust_list", "rseq", "restart_syscall", "sysinfo",
      // files
      "read", "write", "writev", "pread64", "close", "open", "openat", "openat2", "lseek", "fstat", "stat",
      "lstat", "newfstatat", "statx", "statfs", "fstatfs", "getdents64", "readlink", "readlinkat", "fcntl",
      "access", "faccessat", "faccessat2", "getcwd", "chdir", "fchdir", "mkdirat", "ioctl", "dup", "dup2", "dup3",
      "fsync",
      // the job itself
      "setns", "mount"};
  for (const char* name : kAllowed) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0) != 0)
      throw Error(std::string("seccomp: cannot allow ") + name, 0, kExitFailure);
  }
  if (int rc = seccomp_load(ctx.get()); rc != 0) throw system_error("seccomp_load", -rc);
}

}  // namespace gpurun
