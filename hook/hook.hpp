#pragma once

#include <optional>
#include <string>

#include "contract.hpp"

namespace gpurun {

struct HookOptions {
  std::optional<std::string> config;        // --config PATH
  bool debug = false;                       // --debug: log lines also on stderr
  std::string stage;                        // informational: createRuntime, prestart, ...
  int state_fd = 0;                         // where the OCI state comes from
  bool sandbox = true;                      // drop capabilities and install seccomp
  std::string decision_dir = kDecisionDir;  // where the decision record goes (decision_record.hpp); tests change it
};

// Parses `gpu-run-hook [--config PATH] [--debug] [STAGE]`. Throws Error on bad usage.
HookOptions parse_hook_args(int argc, char** argv);

// The hook's flow: config, OCI state, sandbox, decision, then resize /dev/shm in the
// container's mount namespace. Returns the exit code; on failure the one line for
// stderr is in `error_line`.
int run_hook(const HookOptions& options, std::string& error_line);

}  // namespace gpurun
