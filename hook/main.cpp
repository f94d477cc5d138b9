#include <iostream>
#include <string>

#include "error.hpp"
#include "hook.hpp"

#ifdef GPU_RUN_SANITIZE
// LeakSanitizer stops the world with ptrace, which the hook's seccomp filter forbids; the
// hook's leaks are checked under valgrind instead (tests/integration/hook_valgrind_test.sh).
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  try {
    gpurun::HookOptions options = gpurun::parse_hook_args(argc, argv);
    std::string error_line;
    int rc = gpurun::run_hook(options, error_line);
    if (rc != 0 && !error_line.empty()) std::cerr << "gpu-run-hook: " << error_line << "\n";
    return rc;
  } catch (const gpurun::Error& e) {
    std::cerr << (e.exit_code() == 0 ? "" : "gpu-run-hook: ") << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "gpu-run-hook: " << e.what() << "\n";
    return gpurun::kExitFailure;
  }
}
