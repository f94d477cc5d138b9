#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fd.hpp"
#include "unique_handle.hpp"

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

 private:
  UniqueHandle<pid_t, -1, kill_and_reap> pid_;
};

// Starts argv[0] (searched on PATH) with the caller's stdin/stdout/stderr.
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
