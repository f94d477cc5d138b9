#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "env.hpp"
#include "host.hpp"
#include "profile.hpp"
#include "sizing.hpp"

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
  std::vector<std::string> profile_dirs;  // searched first, in order
};

// The SizingRequest of `flags` for a container whose options say `facts` (its --memory,
// --cpus and --cpuset-cpus bound the plan) on `host`. Throws Error (exit 2) naming the flag.
SizingRequest sizing_request_from(const SizingFlags& flags, const EngineOptionFacts& facts, const Config& config,
                                  const HostInfo& host);

// What --profile asks for: the flag, else the config's default_profile, else "default".
std::string profile_argument(const SizingFlags& flags, const Config& config);

// That profile, merged, from the --profile-dir directories first and then the search path
// (a path to a .json file is allowed: this is a person's command line). Throws Error.
Profile load_sizing_profile(const SizingFlags& flags, const Config& config, const EnvLookup& env = process_env);

}  // namespace gpurun
