#include "base/error.hpp"

#include <cstring>

namespace gpurun {

Error::Error(const std::string& message, int errno_value, int exit_code)
    : std::runtime_error(message), errno_(errno_value), exit_code_(exit_code) {}

Error Error::with_context(const std::string& context) const {
  return Error(context + ": " + what(), errno_, exit_code_);
}

Error Error::with_hint(const std::string& hint) const { return Error(what() + hint, errno_, exit_code_); }

Error Error::with_exit_code(int exit_code) const { return Error(what(), errno_, exit_code); }

Error system_error(const std::string& what, int errno_value) {
  std::string message = what;
  if (errno_value != 0) message += std::string(": ") + std::strerror(errno_value);
  return Error(message, errno_value, kExitFailure);
}

Error usage_error(const std::string& message, int errno_value) { return Error(message, errno_value, kExitUsage); }

}  // namespace gpurun
