#include "invocation.hpp"

#include <sys/statvfs.h>

#include <cmath>

#include "contract.hpp"
#include "error.hpp"
#include "gpus.hpp"
#include "profile_store.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

std::uint64_t count_flag(const std::optional<std::string>& v, const char* flag, std::uint64_t min, std::uint64_t max) {
  std::uint64_t n = parse_count(*v, flag, max);
  if (n < min) throw Error(std::string(flag) + ": must be at least " + std::to_string(min));
  return n;
}

std::optional<std::uint64_t> host_shm_size() {
  struct statvfs st {};
  if (::statvfs("/dev/shm", &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
}

}  // namespace

SizingRequest sizing_request_from(const WrapperOptions& o, const EngineOptionFacts& facts, const Config& config,
                                  const HostInfo& host) {
  SizingRequest r;
  if (o.gpus) {
    GpuRequest g = parse_gpu_request(*o.gpus);
    if (g.all) {
      g.count = count_host_gpus();
      if (g.count == 0)
        throw Error(
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
      throw Error("--cpus '" + facts.cpus->substr(0, 40) + "': expected a positive number of CPUs");
    r.cpus = std::min(r.cpus, static_cast<unsigned>(std::ceil(c)));
  }
  if (facts.cpuset_cpus) {
    auto n = parse_cpu_list(*facts.cpuset_cpus);
    if (!n || *n == 0)
      throw Error("--cpuset-cpus '" + facts.cpuset_cpus->substr(0, 40) + "': expected a CPU list such as 0-3,8");
    r.cpus = std::min(r.cpus, *n);
  }
  if (r.cpus == 0) r.cpus = 1;
  r.memory_fraction_max = config.memory_fraction_max;
  return r;
}

EngineInvocation prepare_run(const WrapperOptions& o, const Config& config, const HostInfo& host,
                             const EnvLookup& env) {
  EngineInvocation inv;
  inv.engine = o.engine.value_or(config.engine);
  if (inv.engine != "docker" && inv.engine != "podman")
    throw Error("--engine '" + inv.engine.substr(0, 40) + "': expected docker or podman");
  std::string gpu_mode = o.gpu_request.value_or(effective_gpu_request(config, inv.engine));
  if (gpu_mode != "docker" && gpu_mode != "cdi" && gpu_mode != "none")
    throw Error("--gpu-request '" + gpu_mode.substr(0, 40) + "': expected docker, cdi or none");

  const EngineOptionFacts facts = scan_engine_options(o.engine_options);
  const SizingRequest request = sizing_request_from(o, facts, config, host);

  std::vector<fs::path> cli_dirs(o.profile_dirs.begin(), o.profile_dirs.end());
  ProfileStore store(profile_search_path(cli_dirs, config, true, env));
  const std::string profile_name = o.profile.value_or(config.default_profile.value_or("default"));
  Profile profile = store.load(profile_name, true);
  inv.plan = plan_shm(profile, request);
  inv.applied_shm = inv.plan.shm;

  std::optional<std::uint64_t> user_shm;
  if (facts.shm_size) user_shm = parse_size(*facts.shm_size, "--shm-size");
  const std::string ipc = facts.ipc.value_or("");
  if (ipc == "host" || facts.host_shm_mount) {
    inv.sized = false;
    std::string what = ipc == "host" ? "--ipc=host" : "a bind mount onto /dev/shm";
    std::string line = what + ": the container uses the host's /dev/shm";
    if (auto size = host_shm_size()) line += " (" + format_size(*size) + ")";
    line += ", so gpu-run's plan of " + format_size(inv.plan.shm) + " does not apply and is not enforced";
    inv.warnings.push_back(line);
  } else if (ipc.compare(0, 10, "container:") == 0) {
    inv.sized = false;
    inv.warnings.push_back("--ipc=" + ipc + ": the container shares that container's /dev/shm; size that one (plan: " +
                           format_size(inv.plan.shm) + ")");
  } else if (ipc == "none") {
    inv.sized = false;
    inv.warnings.push_back(
        "--ipc=none: the container gets no /dev/shm and DataLoader workers cannot share batches; drop --ipc=none");
  } else if (user_shm) {
    inv.applied_shm = *user_shm;
    if (*user_shm < inv.plan.shm) {
      inv.warnings.push_back("--shm-size " + *facts.shm_size + " (" + format_size(*user_shm) +
                             ") is below gpu-run's plan of " + format_size(inv.plan.shm) +
                             ": DataLoader workers may die with a bus error; your --shm-size wins");
    }
  } else {
    // The plan is applied only when nobody overrides it, so only then must it fit.
    require_fits(inv.plan);
  }
  if (inv.sized && !request.memory_limit && host.mem_total > 0 && inv.applied_shm > host.mem_available) {
    inv.warnings.push_back("/dev/shm of " + format_size(inv.applied_shm) +
                           " is more than this host's available memory (" + format_size(host.mem_available) +
                           "): a full /dev/shm would push the host into swap or OOM");
  }

  std::vector<std::string>& a = inv.argv;
  a = {inv.engine, "run"};
  if (inv.sized && !user_shm) {
    a.push_back("--shm-size");
    a.push_back(engine_size(inv.plan.shm));
  }
  if (o.gpus && gpu_mode != "none") {
    if (gpu_mode == "docker") {
      a.push_back("--gpus");
      a.push_back(*o.gpus);
    } else {
      GpuRequest g = parse_gpu_request(*o.gpus);
      std::vector<std::string> ids = g.devices;
      if (g.all) ids = {"all"};
      if (ids.empty())
        for (unsigned n = 0; n < g.count; ++n) ids.push_back(std::to_string(n));
      for (const auto& id : ids) {
        a.push_back("--device");
        a.push_back("nvidia.com/gpu=" + id);
      }
    }
  }
  for (const auto& [name, value] :
       container_env(inv.plan.profile, inv.plan.workers, inv.plan.batch_size, inv.applied_shm)) {
    a.push_back("-e");
    a.push_back(name + "=" + value);
  }
  for (const auto& [name, value] : container_labels(inv.plan.profile, inv.applied_shm)) {
    a.push_back("--label");
    a.push_back(name + "=" + value);
  }
  a.insert(a.end(), o.engine_options.begin(), o.engine_options.end());
  a.push_back(o.image);
  a.insert(a.end(), o.command.begin(), o.command.end());
  return inv;
}

}  // namespace gpurun
