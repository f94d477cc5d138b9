#pragma once

#include <string>
#include <vector>

#include "config.hpp"
#include "env.hpp"
#include "host.hpp"
#include "run_args.hpp"
#include "sizing.hpp"

namespace gpurun {

// The engine command gpu-run will exec, and what led to it.
struct EngineInvocation {
  std::string engine;             // docker | podman
  std::vector<std::string> argv;  // argv[0] is the engine
  ShmPlan plan;
  std::uint64_t applied_shm = 0;      // the size the container gets (plan or the user's)
  bool sized = true;                  // false when the container uses another /dev/shm (ipc host...)
  std::vector<std::string> warnings;  // one line each, for stderr
};

// Decides everything without side effects: loads the profile through the store,
// plans, checks the fit, and builds the engine argv. Throws Error (exit 2) on bad input.
EngineInvocation prepare_run(const WrapperOptions& options, const Config& config, const HostInfo& host,
                             const EnvLookup& env = process_env);

}  // namespace gpurun
