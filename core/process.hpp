#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpurun {

// A started child process; kills (SIGKILL) and reaps it on destruction unless waited for.
class Child {
 public:
  Child() = default;
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(Child&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // Waits for the child; returns its exit code (128+signal when killed).
  int wait();
  // Non-blocking: true and sets `code` when the child has exited.
  bool poll(int& code);

 private:
  pid_t pid_ = -1;
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

}  // namespace gpurun
