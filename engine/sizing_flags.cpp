#include "engine/sizing_flags.hpp"

#include <cmath>
#include <cstdlib>

#include "base/error.hpp"
#include "base/units.hpp"
#include "engine/run_args.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

const RequestWords kFlagWords = {
    "--gpus",
    "--workers",
    "--batch-size",
    "--shm-size",
    "--memory",
    "--memory",
    "plan with the container's limit (--memory)",
    engine_size,
    nullptr,
    "--profile",
    "--prefetch-factor",
    "pass --workers {n} to gpu-run",
};

ContainerRequest flags_request(const SizingFlags& o) {
  ContainerRequest r;
  r.origin = RequestOrigin::kFlags;
  r.words = &kFlagWords;
  r.profile = o.profile;
  r.gpus = o.gpus;
  r.workers = o.workers;
  r.batch_size = o.batch_size;
  r.prefetch_factor = o.prefetch_factor;
  r.source = "flags";
  return r;
}

SpecFacts engine_option_spec(const EngineOptionFacts& facts) {
  SpecFacts spec;
  if (facts.memory) {
    spec.memory_limit = parse_size(*facts.memory, "--memory");
    if (*spec.memory_limit == 0) spec.memory_limit.reset();
  }
  if (facts.cpus) {
    char* end = nullptr;
    const double c = std::strtod(facts.cpus->c_str(), &end);
    if (end == facts.cpus->c_str() || *end != '\0' || !(c > 0) || c > 65536)
      throw usage_error("--cpus '" + facts.cpus->substr(0, 40) + "': expected a positive number of CPUs");
    spec.cpu_quota = c;
  }
  if (facts.cpuset_cpus) {
    auto n = parse_cpu_list(*facts.cpuset_cpus);
    if (!n || *n == 0)
      throw usage_error("--cpuset-cpus '" + facts.cpuset_cpus->substr(0, 40) + "': expected a CPU list such as 0-3,8");
    spec.cpuset_cpus = *n;
  }
  // --ipc=host: no ipc namespace of its own; a bind onto /dev/shm: the host's (uses_host_shm).
  spec.has_ipc_namespace = facts.ipc.value_or("") != "host";
  // A bind onto /dev/shm from the command line is never an engine's own shm (no source to check).
  if (facts.host_shm_mount) spec.shm_type = SpecShmType::kBind;
  return spec;
}

std::string gpu_request_mode(const SizingFlags& flags, const Config& config, const std::string& engine) {
  std::string mode = flags.gpu_request.value_or(effective_gpu_request(config, engine));
  if (mode != "docker" && mode != "cdi" && mode != "none")
    throw usage_error("--gpu-request '" + mode.substr(0, 40) + "': expected docker, cdi or none");
  return mode;
}

void add_gpu_reach(SpecFacts& spec, const SizingFlags& flags, const std::string& mode, const std::string& engine) {
  if (mode == "none") {
    spec.gpu_reach = GpuReach::none;
    spec.gpu_reach_why = "--gpu-request none";
  } else if (flags.gpus) {
    spec.gpu_reach = GpuReach::some;
    spec.gpu_reach_why = "--gpu-request " + mode + " hands the GPUs to " + engine;
  }
}

std::string profile_argument(const SizingFlags& flags, const Config& config) {
  return flags.profile.value_or(config.default_profile.value_or("default"));
}

ProfileStore sizing_store(const SizingFlags& flags, const Config& config, const EnvLookup& env) {
  const std::vector<fs::path> cli_dirs(flags.profile_dirs.begin(), flags.profile_dirs.end());
  return ProfileStore(profile_search_path(cli_dirs, config.profile_dirs, /*include_user=*/true, env));
}

Profile load_sizing_profile(const SizingFlags& flags, const Config& config, const EnvLookup& env) {
  return sizing_store(flags, config, env).load(profile_argument(flags, config), /*allow_path=*/true);
}

ShmPlan plan_from_flags(const SizingFlags& flags, const EngineOptionFacts& facts, const Config& config,
                        const HostFacts& host, const EnvLookup& env) {
  SpecFacts spec = engine_option_spec(facts);
  add_gpu_reach(spec, flags, gpu_request_mode(flags, config, config.engine), config.engine);
  return plan_request(flags_request(flags), spec, config, sizing_store(flags, config, env), host);
}

}  // namespace gpurun
