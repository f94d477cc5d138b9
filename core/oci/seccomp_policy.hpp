#pragma once

// The syscalls gpu-run-hook may make once it has read its stdin; everything else fails with
// EPERM. One list for the build-time filter generator (tools/seccomp_bpf_gen.cpp) and the
// tests that check the filter the hook installs against it.
namespace gpurun {

inline constexpr const char* kHookSyscalls[] = {
    // memory, threads' basics, exit
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "futex", "exit", "exit_group", "rt_sigreturn",
    "rt_sigaction", "rt_sigprocmask", "sigaltstack", "getpid", "gettid", "tgkill", "getrandom", "clock_gettime",
    "gettimeofday", "time", "nanosleep", "clock_nanosleep", "sched_getaffinity", "sched_yield", "getuid", "geteuid",
    "getgid", "getegid", "uname", "prlimit64", "set_robust_list", "rseq", "restart_syscall", "sysinfo",
    // files
    "read", "write", "writev", "pread64", "close", "open", "openat", "openat2", "lseek", "fstat", "stat", "lstat",
    "newfstatat", "statx", "statfs", "fstatfs", "getdents64", "readlink", "readlinkat", "fcntl", "access", "faccessat",
    "faccessat2", "getcwd", "chdir", "fchdir", "mkdirat", "ioctl", "dup", "dup2", "dup3", "fsync",
    // the decision record (decision_record.hpp), written atomically before the hook joins the container
    "fchmod", "rename", "renameat", "renameat2", "unlink", "unlinkat",
    // the job itself
    "setns", "mount", "fspick", "fsconfig"};

}  // namespace gpurun
