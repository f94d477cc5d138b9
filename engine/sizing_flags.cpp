#include "sizing_flags.hpp"

#include <cmath>
#include <cstdlib>

#include "error.hpp"
#include "gpus.hpp"
#include "profile_store.hpp"
#include "run_args.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

std::uint64_t count_flag(const std::optional<std::string>& v, const char* flag, std::uint64_t min, std::uint64_t max) {
  std::uint64_t n = parse_count(*v, flag, max);
  if (n < min) throw usage_error(std::string(flag) + ": must be at least " + std::to_string(min));
  return n;
}

}  // namespace

SizingRequest sizing_request_from(const SizingFlags& o, const EngineOptionFacts& facts, const Config& config,
                                  const HostInfo& host) {
  SizingRequest r;
  if (o.gpus) {
    GpuRequest g = parse_gpu_request(*o.gpus);
    if (g.all) {
      g.count = count_host_gpus();
      if (g.count == 0)
        throw usage_error(
            "--gpus all: no /dev/nvidiaN devices on this host to count; give the number of GPUs, e.g. --gpus 2");
    }
    r.gpus = g.count;
  }
  if (o.workers) r.workers = count_flag(o.workers, "--workers", 0, 1024);
  if (o.batch_size) r.batch_size = count_flag(o.batch_size, "--batch-size", 1, 1u << 20);
  if (o.prefetch_factor) r.prefetch_factor = count_flag(o.prefetch_factor, "--prefetch-factor", 1, 1024);
  if (facts.memory) {
    r.memory_limit = parse_size(*facts.memory, "--memory");
    if (*r.memory_limit == 0) r.memory_limit.reset();
  }
  r.cpus = host.cpus;
  if (facts.cpus) {
    char* end = nullptr;
    double c = std::strtod(facts.cpus->c_str(), &end);
    if (end == facts.cpus->c_str() || *end != '\0' || !(c > 0) || c > 65536)
      throw usage_error("--cpus '" + facts.cpus->substr(0, 40) + "': expected a positive number of CPUs");
    r.cpus = std::min(r.cpus, static_cast<unsigned>(std::ceil(c)));
  }
  if (facts.cpuset_cpus) {
    auto n = parse_cpu_list(*facts.cpuset_cpus);
    if (!n || *n == 0)
      throw usage_error("--cpuset-cpus '" + facts.cpuset_cpus->substr(0, 40) + "': expected a CPU list such as 0-3,8");
    r.cpus = std::min(r.cpus, *n);
  }
  if (r.cpus == 0) r.cpus = 1;
  r.memory_fraction_max = config.memory_fraction_max;
  return r;
}

std::string profile_argument(const SizingFlags& flags, const Config& config) {
  return flags.profile.value_or(config.default_profile.value_or("default"));
}

Profile load_sizing_profile(const SizingFlags& flags, const Config& config, const EnvLookup& env) {
  const std::vector<fs::path> cli_dirs(flags.profile_dirs.begin(), flags.profile_dirs.end());
  const ProfileStore store(profile_search_path(cli_dirs, config, /*include_user=*/true, env));
  return store.load(profile_argument(flags, config), /*allow_path=*/true);
}

}  // namespace gpurun
