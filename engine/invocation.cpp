#include "engine/invocation.hpp"

#include <sys/statvfs.h>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "oci/gpus.hpp"

namespace gpurun {
namespace {

std::optional<std::uint64_t> host_shm_size() {
  struct statvfs st {};
  if (::statvfs("/dev/shm", &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
}

// When the container's command line starts another number of DataLoader workers than the plan
// holds (docs/docker-and-podman.md, "Workers"): one line with both sizes and the two ways to agree.
std::optional<std::string> worker_flag_warning(const WrapperOptions& o, const ShmPlan& plan,
                                               const ContainerRequest& request, const SpecFacts& spec,
                                               const Config& config, const ProfileStore& store, const HostFacts& host) {
  const auto seen = command_worker_flag(o.command);
  if (!seen || seen->workers == plan.workers) return std::nullopt;
  const std::string n = std::to_string(seen->workers);
  std::string origin = "the profile's workers_per_gpu";
  if (o.sizing.workers)
    origin = "--workers";
  else if (plan.workers_auto)
    origin = "auto: " + std::to_string(plan.cpus) + " CPU" + (plan.cpus == 1 ? "" : "s") + " / " +
             std::to_string(plan.ranks) + " rank" + (plan.ranks == 1 ? "" : "s");
  std::string line = "the command line's '" + seen->flag + "' asks for " + n + " DataLoader workers, but /dev/shm (" +
                     format_size(plan.shm) + ") is planned for " + std::to_string(plan.workers) + " DataLoader worker" +
                     (plan.workers == 1 ? "" : "s") + " per GPU rank (" + origin + ")";
  ContainerRequest asked = request;
  asked.workers = n;
  try {
    const ShmPlan other = plan_request(asked, spec, config, store, host);
    line += "; " + n + " need " + format_size(other.shm);
  } catch (const Error&) {
    // The line still says what to do; the rerun with --workers says why that count cannot be planned.
  }
  return line + ": pass --workers " + n + " to gpu-run, or make the script read GPU_RUN_NUM_WORKERS";
}

}  // namespace

EngineInvocation prepare_run(const WrapperOptions& o, const Config& config, const HostInfo& host,
                             const EnvLookup& env) {
  EngineInvocation inv;
  inv.engine = o.engine.value_or(config.engine);
  if (inv.engine != "docker" && inv.engine != "podman")
    throw usage_error("--engine '" + inv.engine.substr(0, 40) + "': expected docker or podman");
  const std::string gpu_mode = gpu_request_mode(o.sizing, config, inv.engine);

  // The door reads its flags and the engine options; core's one decision sizes.
  const EngineOptionFacts facts = scan_engine_options(o.engine_options);
  ContainerRequest request = flags_request(o.sizing);
  request.shm_size = facts.shm_size;
  if (o.over_budget && !facts.shm_size)
    throw usage_error(
        "--over-budget: keeps a size you chose over the memory budget, and there is none: give --shm-size SIZE "
        "(gpu-run's own plan always fits the budget or is refused)");
  request.over_budget_chosen = o.over_budget;
  SpecFacts spec = engine_option_spec(facts);
  add_gpu_reach(spec, o.sizing, gpu_mode, inv.engine);
  const ProfileStore store = sizing_store(o.sizing, config, env);
  const HostFacts host_facts = command_host_facts(host);
  const ShmDecision d = decide_shm(request, spec, config, store, host_facts);
  const std::string ipc = facts.ipc.value_or("");
  // --ipc=container:... and none: the engine gives this container no /dev/shm to size.
  const bool own_shm = ipc.compare(0, 10, "container:") != 0 && ipc != "none";
  if (!d.error.empty() && own_shm) throw usage_error(d.error);
  // A plan to record and show even beside --shm-size or --ipc=host; its error is the flags'.
  inv.plan = d.plan ? *d.plan : plan_request(request, spec, config, store, host_facts);
  inv.applied_shm = d.act ? d.size : inv.plan.shm;
  if (request.shm_size) inv.users_size = facts.shm_size_flag;

  const std::string& bound = facts.shm_bind_source;
  const bool binds_host_shm = bound.empty() || bound == "/dev/shm" || bound.rfind("/dev/shm/", 0) == 0;
  if (d.host_ipc && ipc != "host" && !binds_host_shm) {
    // A directory of the host's bound there: /dev/shm is that directory, on its own filesystem.
    inv.sized = false;
    inv.warnings.push_back("a bind mount of " + bound.substr(0, 200) +
                           " onto /dev/shm: the container's /dev/shm is that directory, on its filesystem (not a "
                           "tmpfs of its own), so gpu-run's plan of " +
                           format_size(inv.plan.shm) + " does not apply and is not enforced");
  } else if (d.host_ipc) {
    inv.sized = false;
    std::string what = ipc == "host" ? "--ipc=host" : "a bind mount onto /dev/shm";
    std::string line = what + ": the container uses the host's /dev/shm";
    if (auto size = host_shm_size()) line += " (" + format_size(*size) + ")";
    line += ", so gpu-run's plan of " + format_size(inv.plan.shm) + " does not apply and is not enforced";
    inv.warnings.push_back(line);
  } else if (facts.tmpfs_shm && !facts.tmpfs_shm_size) {
    inv.sized = false;
    inv.warnings.push_back(facts.shm_size_flag.substr(0, 200) +
                           ": a tmpfs without a size replaces the engine's /dev/shm, at the kernel's default (half "
                           "the host's memory), so gpu-run's plan of " +
                           format_size(inv.plan.shm) + " does not apply; add size=" + engine_size(inv.plan.shm) +
                           " to size it");
  } else if (ipc.compare(0, 10, "container:") == 0) {
    inv.sized = false;
    inv.warnings.push_back("--ipc=" + ipc + ": the container shares that container's /dev/shm; size that one (plan: " +
                           format_size(inv.plan.shm) + ")");
  } else if (ipc == "none") {
    inv.sized = false;
    inv.warnings.push_back(
        "--ipc=none: the container gets no /dev/shm and DataLoader workers cannot share batches; drop --ipc=none");
  } else if (request.shm_size && d.size < inv.plan.shm) {
    inv.warnings.push_back(facts.shm_size_flag.substr(0, 200) + " (" + format_size(d.size) +
                           ") is below gpu-run's plan of " + format_size(inv.plan.shm) +
                           ": DataLoader workers may die with a bus error; your " +
                           (facts.tmpfs_shm ? "tmpfs" : "--shm-size") + " wins");
  }
  if (inv.sized && d.budget_waived && d.refusal) {
    const MemoryBudget budget{d.refusal->memory_limit, d.refusal->memory_fraction_max};
    inv.warnings.push_back(inv.users_size.substr(0, 200) + " (" + format_size(d.size) + ") " + budget.over() +
                           ": kept, as --over-budget says you chose it; a full /dev/shm can get the container "
                           "OOM-killed (recorded as the label " +
                           kLabelOverBudget + ")");
  }
  if (inv.sized && !request.shm_size) {
    if (auto line = worker_flag_warning(o, inv.plan, request, spec, config, store, host_facts))
      inv.warnings.push_back(*line);
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
  // --gpus 0 is no GPU: nothing to request (Docker's own --gpus 0 fails to select a driver).
  const bool wants_gpus = o.sizing.gpus && gpu_mode != "none" && inv.plan.gpus > 0;
  if (wants_gpus) {
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
  NameValues labels = container_labels(inv.plan.profile, inv.plan.gpus, recorded_shm);
  if (inv.sized && d.budget_waived) labels.emplace_back(kLabelOverBudget, "chosen");
  for (const auto& [name, value] : labels) {
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

std::string explain_outcome(const EngineInvocation& inv) {
  if (!inv.sized) return "=> /dev/shm not sized by gpu-run (the warning above says why)\n";
  if (!inv.users_size.empty())
    return "=> /dev/shm " + format_size(inv.applied_shm) + " (yours: " + inv.users_size.substr(0, 200) + ")\n";
  return "=> /dev/shm " + format_size(inv.applied_shm) + " (gpu-run passes --shm-size " + engine_size(inv.applied_shm) +
         ")\n";
}

}  // namespace gpurun
