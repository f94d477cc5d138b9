#include "shm_remount.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "error.hpp"
#include "fd.hpp"
#include "process.hpp"
#include "sandbox.hpp"

namespace gpurun {
namespace {

// What the child sends back over the pipe: a fixed-size record.
struct ChildReport {
  int exit_code = kExitFailure;  // kExitOk when `result` holds
  int err = 0;
  int outcome = 0;
  std::uint64_t before = 0;
  std::uint64_t after = 0;
  char message[512] = {};
};

}  // namespace

ShmResult remount_shm_in_child(int pid, std::uint64_t size, bool allow_shrink, std::optional<dev_t> host_dev) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw system_error("pipe", errno);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  std::cout.flush();
  const pid_t child_pid = ::fork();
  if (child_pid < 0) throw system_error("fork", errno);
  if (child_pid == 0) {
    ChildReport report;
    try {
      UniqueFd ns(open_mount_namespace(pid));
      drop_capabilities();
      install_seccomp();
      join_mount_namespace(ns.get(), pid);
      // After setns the process's root is the namespace's: the container's root.
      const ShmResult r = apply_shm(ShmTarget{pid, "/", size, allow_shrink, host_dev});
      report.exit_code = kExitOk;
      report.outcome = static_cast<int>(r.outcome);
      report.before = r.before;
      report.after = r.after;
    } catch (const Error& e) {
      report.exit_code = e.exit_code();
      report.err = e.errno_value();
      std::strncpy(report.message, e.what(), sizeof report.message - 1);
    } catch (const std::exception& e) {
      std::strncpy(report.message, e.what(), sizeof report.message - 1);
    }
    (void)!::write(write_end.get(), &report, sizeof report);
    ::_exit(0);
  }
  Child child(child_pid);
  write_end.reset();
  ChildReport report;
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&report);
  while (got < sizeof report) {
    const ssize_t n = ::read(read_end.get(), bytes + got, sizeof report - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  const int code = child.wait();
  if (got != sizeof report)
    throw Error("remount /dev/shm: the child process ended without a report (exit " + std::to_string(code) + ")");
  report.message[sizeof report.message - 1] = '\0';
  if (report.exit_code != kExitOk) throw Error(report.message, report.err, report.exit_code);
  ShmResult r;
  r.outcome = static_cast<ShmOutcome>(report.outcome);
  r.before = report.before;
  r.after = report.after;
  return r;
}

}  // namespace gpurun
