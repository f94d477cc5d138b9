#pragma once

#include <optional>
#include <string>

#include "base/error.hpp"
#include "decision/contract.hpp"
#include "shm/shm_remount.hpp"

namespace gpurun {

struct HookOptions {
  std::optional<std::string> config;  // --config PATH
  bool debug = false;                 // --debug: log lines also on stderr
  std::string stage;                  // informational: createRuntime, prestart, ...
  int state_fd = 0;                   // where the OCI state comes from
  bool sandbox = true;                // drop capabilities and install seccomp
  // --remount PID BYTES [...]: the remount helper of the guards and resize (shm_remount.hpp)
  std::optional<RemountRequest> remount;
  std::string decision_dir = kDecisionDir;  // where the decision record goes (decision_record.hpp); tests change it
};

// Parses `gpu-run-hook [--config PATH] [--debug] [STAGE]`, or the remount mode
// `gpu-run-hook --remount PID BYTES [--allow-shrink] [--host-dev DEV]`. Throws Error on bad usage.
HookOptions parse_hook_args(int argc, char** argv);

// What the hook's flow ends with: its exit code and, on failure, the one line for stderr.
struct HookResult {
  int exit_code = kExitOk;
  std::string error_line;
};

// The hook's flow: config, OCI state, sandbox, decision, then resize /dev/shm in the
// container's mount namespace.
HookResult run_hook(const HookOptions& options);

// The remount mode: remounts the container's /dev/shm from this process (remount_shm_here) and
// writes its report, one JSON line, to `out`. Returns the exit code (the error's on failure).
int run_remount(const RemountRequest& request, int out);

}  // namespace gpurun
