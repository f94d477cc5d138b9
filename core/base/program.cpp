#include "base/program.hpp"

#include <unistd.h>

#include "base/fd.hpp"

namespace gpurun {

void print_line(const std::string& line) {
  try {
    write_all(STDERR_FILENO, line + "\n", "stderr");
  } catch (const Error&) {  // nowhere left to report it
  }
}

void print_error(const char* program, const std::string& message) { print_line(std::string(program) + ": " + message); }

void print_warning(const char* program, const std::string& message) { print_error(program, "warning: " + message); }

}  // namespace gpurun
