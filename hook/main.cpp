#include <unistd.h>

#include <string>

#include "error.hpp"
#include "fd.hpp"
#include "hook.hpp"

#ifdef GPU_RUN_SANITIZE
// LeakSanitizer stops the world with ptrace, which the hook's seccomp filter forbids; the
// hook's leaks are checked under valgrind instead (tests/integration/hook_valgrind_test.sh).
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

namespace {

// One line on stderr with write(2): no iostreams in the hook (their set-up alone was 4% of a
// run). The line is for runc, which puts it in its error message.
void print_line(const std::string& prefix, const std::string& text) {
  try {
    gpurun::write_all(STDERR_FILENO, prefix + text + "\n", "stderr");
  } catch (const gpurun::Error&) {  // nowhere left to report it
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    gpurun::HookOptions options = gpurun::parse_hook_args(argc, argv);
    std::string error_line;
    int rc = gpurun::run_hook(options, error_line);
    if (rc != 0 && !error_line.empty()) print_line("gpu-run-hook: ", error_line);
    return rc;
  } catch (const gpurun::Error& e) {
    print_line(e.exit_code() == 0 ? "" : "gpu-run-hook: ", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_line("gpu-run-hook: ", e.what());
    return gpurun::kExitFailure;
  }
}
