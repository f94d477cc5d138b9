#include <unistd.h>

#include <string>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/program.hpp"
#include "hook/hook.hpp"

#ifdef GPU_RUN_SANITIZE
// LeakSanitizer stops the world with ptrace, which the hook's seccomp filter forbids; the
// hook's leaks are checked under valgrind instead (tests/integration/hook_valgrind_test.sh).
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  try {
    gpurun::HookOptions options = gpurun::parse_hook_args(argc, argv);
    if (options.remount) return gpurun::run_remount(*options.remount, STDOUT_FILENO);
    const gpurun::HookResult r = gpurun::run_hook(options);
    if (r.exit_code != 0 && !r.error_line.empty()) gpurun::print_error("gpu-run-hook", r.error_line);
    return r.exit_code;
  } catch (const gpurun::Error& e) {
    if (e.exit_code() == gpurun::kExitOk) {  // --help: the usage line alone, on stdout
      const std::string usage = std::string(e.what()) + "\n";
      (void)!::write(STDOUT_FILENO, usage.data(), usage.size());
      return gpurun::kExitOk;
    }
    gpurun::print_error("gpu-run-hook", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    gpurun::print_error("gpu-run-hook", e.what());
    return gpurun::kExitFailure;
  }
}
