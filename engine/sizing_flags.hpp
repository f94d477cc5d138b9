#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "decision/config.hpp"
#include "decision/shm_decision.hpp"
#include "decision/sizing.hpp"
#include "oci/host.hpp"
#include "profiles/profile.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

struct EngineOptionFacts;  // run_args.hpp

// The flags that size /dev/shm for a job: gpu-run's, and those of every gpu-run-ctl command
// that plans (gpu-run-ctl registers them with add_sizing_flags, gpu-run parses them itself).
struct SizingFlags {
  std::optional<std::string> profile;  // a name or a .json path; default: the config's, else "default"
  std::optional<std::string> gpus;     // Docker's syntax: N, all, device=0,1
  std::optional<std::string> workers;  // DataLoader workers per GPU
  std::optional<std::string> batch_size;
  std::optional<std::string> prefetch_factor;
  std::optional<std::string> gpu_request;  // docker | cdi | none: how --gpus reaches the engine
  std::vector<std::string> profile_dirs;   // searched first, in order
};

// How a person's command line names what to change when core refuses a size (refusal.hpp).
extern const RequestWords kFlagWords;

// The flags as a request for core's one decision (origin kFlags: a profile may be a path,
// --gpus takes Docker's syntax, messages name the flags).
ContainerRequest flags_request(const SizingFlags& flags);

// The engine options that bound the plan and say where /dev/shm comes from, as the container
// facts core's decision reads: --memory, --cpus, --cpuset-cpus, --ipc=host, a bind onto
// /dev/shm. Throws Error (exit 2) naming the option when one is malformed.
SpecFacts engine_option_spec(const EngineOptionFacts& facts);

// How --gpus reaches the container: --gpu-request, else the config's for `engine`. Throws Error
// (exit 2) for a value other than docker, cdi or none.
std::string gpu_request_mode(const SizingFlags& flags, const Config& config, const std::string& engine);

// What that mode says to core about the GPUs' reach: none hands no GPU to the engine (a pinned
// loader is planned as PyTorch runs it there); docker and cdi hand it the --gpus.
void add_gpu_reach(SpecFacts& spec, const SizingFlags& flags, const std::string& mode, const std::string& engine);

// What --profile asks for: the flag, else the config's default_profile, else "default".
std::string profile_argument(const SizingFlags& flags, const Config& config);

// The profile store of a person's command line: the --profile-dir directories first, then the
// search path (the user's own profiles included).
ProfileStore sizing_store(const SizingFlags& flags, const Config& config, const EnvLookup& env = process_env);

// That profile, merged (a path to a .json file is allowed: this is a person's command line).
// Throws Error.
Profile load_sizing_profile(const SizingFlags& flags, const Config& config, const EnvLookup& env = process_env);

// The plan for `flags` and the engine options' facts on `host`, through core's plan_request, the
// GPUs' reach as gpu-run gives it with the config's engine: what gpu-run-ctl plan, resize and
// calibrate show. Throws Error naming the flag.
ShmPlan plan_from_flags(const SizingFlags& flags, const EngineOptionFacts& facts, const Config& config,
                        const HostFacts& host, const EnvLookup& env = process_env);

}  // namespace gpurun
