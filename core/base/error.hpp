#pragma once

#include <stdexcept>
#include <string>

namespace gpurun {

// Exit codes shared by every binary: 2 means the user asked for something wrong
// (bad flag, profile, size), 1 means the system failed while doing what was asked.
enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

// The project's one error type. Carries an errno (0 when none) and an exit code, 1 (a
// failure) unless it says otherwise; gains context as it travels up ("load profile x: ..."),
// keeping both (docs/ARCHITECTURE.md, "Errors and refusals").
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int errno_value = 0, int exit_code = kExitFailure);

  int errno_value() const { return errno_; }
  int exit_code() const { return exit_code_; }

  // Returns a copy whose message is "context: <this message>".
  Error with_context(const std::string& context) const;

  // Returns a copy whose message is "<this message><hint>": what to do, added by the caller
  // that knows (" (run as root, or pick another path)"). `hint` brings its own separator.
  Error with_hint(const std::string& hint) const;

  // Returns a copy that exits with `exit_code`: a door decides whose fault it is (a path a person
  // gave that cannot be read is a usage error, 2), message and errno kept.
  Error with_exit_code(int exit_code) const;

 private:
  int errno_;
  int exit_code_;
};

// A failure of the system (a syscall, an engine) rather than of the user's input.
Error system_error(const std::string& what, int errno_value);

// The user asked for something wrong (a flag, a profile, a size, a name): exit 2.
Error usage_error(const std::string& message, int errno_value = 0);

}  // namespace gpurun
