#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.hpp"
#include "base/unique_handle.hpp"

namespace gpurun {

// SIGKILL and waitpid, for Child.
void kill_and_reap(pid_t pid);

// A started child process; kills (SIGKILL) and reaps it on destruction unless waited for.
class Child {
 public:
  Child() = default;
  explicit Child(pid_t pid) : pid_(pid) {}

  pid_t pid() const { return pid_.get(); }
  // Waits for the child; returns its exit code (128+signal when killed).
  int wait();
  // Non-blocking: true and sets `code` when the child has exited.
  bool poll(int& code);
  // Lets go of the child without killing or reaping it; returns its pid.
  pid_t release() { return pid_.release(); }

 private:
  UniqueHandle<pid_t, -1, kill_and_reap> pid_;
};

// How a child starts: the program and the descriptors it gets as 0, 1 and 2. Everything is made
// before it starts: the guard forks from a process with threads, and a child that allocated
// between fork and exec could wait forever on a lock another thread held at the fork.
struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] searched on PATH unless it holds a '/'
  int stdin_fd = -1;              // -1: the caller's
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool null_stdin = false;  // /dev/null as stdin (overrides stdin_fd)
};

// The one place a gpu-run process starts another (posix_spawn: the program runs right after
// the clone, nothing in between). The child gets the caller's environment, an empty signal mask
// and every signal at its default; it inherits no descriptor opened O_CLOEXEC, as every one of
// gpu-run's is, so no lock (flock or record) either. Throws Error "cannot run PROGRAM: ..." when
// the program cannot be started (missing, not executable).
Child spawn(const SpawnSpec& spec);

// spawn with the caller's stdin/stdout/stderr.
Child spawn(const std::vector<std::string>& argv);

struct Captured {
  int exit_code = -1;
  std::string out;  // stdout, at most 4 MiB
  std::string err;  // stderr, at most 64 KiB
};

// Runs argv to completion, capturing stdout and stderr. Throws Error when it cannot start.
Captured run_capture(const std::vector<std::string>& argv);

// 128+signal for signalled children, the exit code otherwise.
int exit_code_of(int wait_status);

// Where the program `name` runs from: `name` itself when it holds a '/', else the first
// executable regular file of that name in $PATH's directories (the usual ones when PATH is
// unset) that `skip` does not reject. nullopt when there is none.
std::optional<std::filesystem::path> find_executable(
    const std::string& name, const std::function<bool(const std::filesystem::path&)>& skip = {});

// A pidfd of `pid` (pidfd_open(2)), readable once the process has exited; empty with errno set
// when there is none (ESRCH: it is gone; ENOSYS: Linux before 5.3).
UniqueFd open_pidfd(int pid);

}  // namespace gpurun
