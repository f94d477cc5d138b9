#pragma once

#include <string>
#include <vector>

#include "base/env.hpp"
#include "decision/config.hpp"
#include "decision/sizing.hpp"
#include "engine/run_args.hpp"
#include "oci/host.hpp"

namespace gpurun {

// The engine command gpu-run will exec, and what led to it.
struct EngineInvocation {
  std::string engine;             // docker | podman
  std::vector<std::string> argv;  // argv[0] is the engine
  ShmPlan plan;
  std::uint64_t applied_shm = 0;      // the size the container gets (plan or the user's)
  bool sized = true;                  // false when the container uses another /dev/shm (ipc host...)
  std::string users_size;             // the user's flag that sized it ("--shm-size 1g"); "" for the plan
  std::vector<std::string> warnings;  // one line each, for stderr
};

// The last line of --explain, as gpu-run-ctl plan ends: "=> /dev/shm 256MiB (gpu-run passes
// --shm-size 256m)", or the user's size, or why gpu-run does not size it.
std::string explain_outcome(const EngineInvocation& inv);

// Decides everything without side effects: loads the profile through the store,
// plans, checks the fit, and builds the engine argv. Throws Error (exit 2) on bad input.
EngineInvocation prepare_run(const WrapperOptions& options, const Config& config, const HostInfo& host,
                             const EnvLookup& env = process_env);

}  // namespace gpurun
