#pragma once

#include <exception>
#include <string>

#include "base/error.hpp"

namespace gpurun {

// Writes `line` and a newline to stderr in one write(2) (no iostreams: the hook and the runtime
// start on every container start; and the lines of threads writing at once stay whole). Never
// throws.
void print_line(const std::string& line);

// "<program>: <message>\n", the same way.
void print_error(const char* program, const std::string& message);

// "<program>: warning: <message>\n", the same way: every warning a person reads on stderr.
void print_warning(const char* program, const std::string& message);

// Every binary's main: runs `body` and turns what it throws into one line on stderr and the
// exit code (an Error's own, 1 for anything else).
template <typename Body>
int run_program(const char* program, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    print_error(program, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_error(program, e.what());
    return kExitFailure;
  }
}

}  // namespace gpurun
