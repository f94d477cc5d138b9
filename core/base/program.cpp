#include "program.hpp"

#include <unistd.h>

#include "fd.hpp"

namespace gpurun {

void print_error(const char* program, const std::string& message) {
  try {
    write_all(STDERR_FILENO, std::string(program) + ": " + message + "\n", "stderr");
  } catch (const Error&) {  // nowhere left to report it
  }
}

void print_warning(const char* program, const std::string& message) { print_error(program, "warning: " + message); }

}  // namespace gpurun
