#include "invocation.hpp"

#include <sys/statvfs.h>

#include "contract.hpp"
#include "decision_record.hpp"
#include "error.hpp"
#include "gpus.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

std::optional<std::uint64_t> host_shm_size() {
  struct statvfs st {};
  if (::statvfs("/dev/shm", &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
}

}  // namespace

EngineInvocation prepare_run(const WrapperOptions& o, const Config& config, const HostInfo& host,
                             const EnvLookup& env) {
  EngineInvocation inv;
  inv.engine = o.engine.value_or(config.engine);
  if (inv.engine != "docker" && inv.engine != "podman")
    throw usage_error("--engine '" + inv.engine.substr(0, 40) + "': expected docker or podman");
  std::string gpu_mode = o.gpu_request.value_or(effective_gpu_request(config, inv.engine));
  if (gpu_mode != "docker" && gpu_mode != "cdi" && gpu_mode != "none")
    throw usage_error("--gpu-request '" + gpu_mode.substr(0, 40) + "': expected docker, cdi or none");

  // The door reads its flags and the engine options; core's one decision sizes.
  const EngineOptionFacts facts = scan_engine_options(o.engine_options);
  ContainerRequest request = flags_request(o.sizing);
  request.shm_size = facts.shm_size;
  SpecFacts spec = engine_option_spec(facts);
  if (gpu_mode == "none") {
    // gpu-run hands no GPU to the engine: a pinned loader is planned as PyTorch runs it there.
    spec.gpu_reach = GpuReach::none;
    spec.gpu_reach_why = "--gpu-request none";
  } else if (o.sizing.gpus) {
    spec.gpu_reach = GpuReach::some;
    spec.gpu_reach_why = "--gpu-request " + gpu_mode + " hands the GPUs to " + inv.engine;
  }
  const ProfileStore store = sizing_store(o.sizing, config, env);
  const HostFacts host_facts = command_host_facts(host);
  const ShmDecision d = decide_shm(request, spec, config, store, host_facts);
  const std::string ipc = facts.ipc.value_or("");
  // --ipc=container:... and none: the engine gives this container no /dev/shm to size.
  const bool own_shm = ipc.compare(0, 10, "container:") != 0 && ipc != "none";
  if (!d.error.empty() && own_shm) {
    // A plan over the budget, in a person's words: the plan's problem names --memory and the flags.
    if (d.over_budget && !request.shm_size && d.plan && !d.plan->problem.empty()) throw usage_error(d.plan->problem);
    throw usage_error(d.error);
  }
  // A plan to record and show even beside --shm-size or --ipc=host; its error is the flags'.
  inv.plan = d.plan ? *d.plan : plan_request(request, spec, config, store, host_facts);
  inv.applied_shm = d.act ? d.size : inv.plan.shm;

  if (d.host_ipc) {
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
  } else if (request.shm_size && d.size < inv.plan.shm) {
    inv.warnings.push_back("--shm-size " + *facts.shm_size + " (" + format_size(d.size) +
                           ") is below gpu-run's plan of " + format_size(inv.plan.shm) +
                           ": DataLoader workers may die with a bus error; your --shm-size wins");
  }
  if (inv.sized && !spec.memory_limit && host.mem_total > 0 && inv.applied_shm > host.mem_available) {
    inv.warnings.push_back("/dev/shm of " + format_size(inv.applied_shm) +
                           " is more than this host's available memory (" + format_size(host.mem_available) +
                           "): a full /dev/shm would push the host into swap or OOM");
  }

  std::vector<std::string>& a = inv.argv;
  a = {inv.engine, "run"};
  if (inv.sized && !request.shm_size) {
    a.push_back("--shm-size");
    a.push_back(engine_size(inv.plan.shm));
  }
  if (o.sizing.gpus && gpu_mode != "none") {
    if (gpu_mode == "docker") {
      a.push_back("--gpus");
      a.push_back(*o.sizing.gpus);
    } else {
      GpuRequest g = parse_gpu_request(*o.sizing.gpus);
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
  // A size is recorded only when the container gets it (not under --ipc=host and the like).
  std::optional<std::uint64_t> recorded_shm;
  if (inv.sized) recorded_shm = inv.applied_shm;
  for (const auto& [name, value] :
       container_env(inv.plan.profile, inv.plan.gpus, inv.plan.workers, inv.plan.batch_size, recorded_shm)) {
    a.push_back("-e");
    a.push_back(name + "=" + value);
  }
  for (const auto& [name, value] : container_labels(inv.plan.profile, inv.plan.gpus, recorded_shm)) {
    a.push_back("--label");
    a.push_back(name + "=" + value);
  }
  // What gpu-run decided, once, for the guard, doctor and watch (decision_record.hpp).
  ShmDecision applied = d;
  applied.plan = inv.plan;
  applied.size = inv.applied_shm;
  a.push_back("--label");
  a.push_back(std::string(kDecisionKey) + "=" + decision_text(decision_record(applied, "gpu-run", inv.sized)));
  a.insert(a.end(), o.engine_options.begin(), o.engine_options.end());
  a.push_back(o.image);
  a.insert(a.end(), o.command.begin(), o.command.end());
  return inv;
}

}  // namespace gpurun
