#include "engine/invocation.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

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

// The GPU_RUN_* request keys the engine options put in the container's environment (-e, --env,
// --env-file, the last of a name winning as with the engine), read as the runtime reads them:
// each key under either of its names (core's env_value), "NAME" alone from gpu-run's environment.
std::map<std::string, std::string> env_request_keys(const EngineOptionFacts& facts, const EnvLookup& env) {
  std::map<std::string, std::string> keys;
  auto take = [&](const std::string& item) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (!request_key_of_env(name)) return;
    if (eq != std::string::npos) {
      keys[name] = item.substr(eq + 1);
    } else if (auto v = env(name)) {
      keys[name] = *v;
    } else {
      keys.erase(name);  // the engine passes a NAME it cannot find as unset
    }
  };
  for (const std::string& file : facts.env_files) {
    std::ifstream in(file);
    if (!in) throw usage_error("--env-file " + file.substr(0, 200) + ": cannot read it (" + std::strerror(errno) + ")");
    for (std::string line; std::getline(in, line);) {
      const auto start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      take(line.substr(start));
    }
  }
  for (const std::string& item : facts.env) take(item);
  return keys;
}

// The wrapper's field for a request key: the flag --NAME of the key's name (the contract's).
std::optional<std::string>* wrapper_field(RequestKey key, WrapperOptions& o, EngineOptionFacts& facts) {
  switch (key) {
    case RequestKey::kProfile:
      return &o.sizing.profile;
    case RequestKey::kGpus:
      return &o.sizing.gpus;
    case RequestKey::kWorkers:
      return &o.sizing.workers;
    case RequestKey::kBatchSize:
      return &o.sizing.batch_size;
    case RequestKey::kShmSize:
      return &facts.shm_size;
  }
  throw Error("unknown request key");
}

// Folds the request keys given with -e into gpu-run's own flags, as if each were its flag
// (GPU_RUN_WORKERS=8 is --workers 8, GPU_RUN_SHM_SIZE=1g is --shm-size 1g): one request whatever
// name carried it. A key given both ways with two values is refused in one line naming both.
void take_env_keys(WrapperOptions& o, EngineOptionFacts& facts, const EnvLookup& env) {
  const std::map<std::string, std::string> keys = env_request_keys(facts, env);
  for (const RequestKeySpec& k : kRequestKeys) {
    const EnvValue e = env_value(keys, k);
    if (!e.conflict.empty()) throw usage_error("-e " + e.conflict);
    if (!e.value) continue;
    const std::string given = "-e " + e.name + "=" + e.value->substr(0, 40);
    std::optional<std::string>* flag = wrapper_field(k.key, o, facts);
    if (*flag && **flag != *e.value) {
      // How the person gave it: the flag, or the engine's own sizing of /dev/shm (--tmpfs ...).
      std::string as_given = std::string("--") + k.name + " " + (*flag)->substr(0, 40);
      if (k.key == RequestKey::kShmSize && !facts.shm_size_flag.empty()) as_given = facts.shm_size_flag.substr(0, 80);
      throw usage_error(as_given + " and " + given + " name one key (" + k.name + ") with two values: give one");
    }
    if (k.key == RequestKey::kShmSize && !*flag) facts.shm_size_flag = given;
    *flag = *e.value;
  }
}

}  // namespace

EngineInvocation prepare_run(const WrapperOptions& given, const Config& config, const HostInfo& host,
                             const EnvLookup& env) {
  EngineInvocation inv;
  WrapperOptions o = given;
  EngineOptionFacts facts = scan_engine_options(o.engine_options);
  const bool engine_shm_size = facts.shm_size.has_value() || facts.tmpfs_shm;
  take_env_keys(o, facts, env);
  inv.engine = o.engine.value_or(config.engine);
  if (inv.engine != "docker" && inv.engine != "podman")
    throw usage_error("--engine '" + inv.engine.substr(0, 40) + "': expected docker or podman");
  const std::string gpu_mode = gpu_request_mode(o.sizing, config, inv.engine);

  // The door reads its flags, the engine options and the request keys given with -e; core's one
  // decision sizes.
  ContainerRequest request = flags_request(o.sizing);
  request.shm_size = facts.shm_size;
  if (o.over_budget && !facts.shm_size)
    throw usage_error(
        "--over-budget: keeps a size you chose over the memory budget, and there is none: give --shm-size SIZE "
        "(gpu-run's own plan always fits the budget or is refused)");
  request.over_budget_chosen = o.over_budget;
  SpecFacts spec = engine_option_spec(facts);
  add_gpu_reach(spec, o.sizing, gpu_mode, inv.engine);
  spec.args = o.command;
  const ProfileStore store = sizing_store(o.sizing, config, env);
  HostFacts host_facts = node_host_facts(host);
  host_facts.guarded = host_facts.guarded || o.guard;  // its own guard grows it
  const ShmDecision d = decide_shm(request, spec, config, store, host_facts);
  const std::string ipc = facts.ipc.value_or("");
  // --ipc=container:... and none: the engine gives this container no /dev/shm to size.
  const bool own_shm = ipc.compare(0, 10, "container:") != 0 && ipc != "none";
  if (d.error && own_shm) throw *d.error;
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
  if (inv.sized && !request.shm_size && !d.command_warning.empty()) inv.warnings.push_back(d.command_warning);
  if (inv.sized && !spec.memory_limit && host.mem_total > 0 && inv.applied_shm > host.mem_available) {
    inv.warnings.push_back("/dev/shm of " + format_size(inv.applied_shm) +
                           " is more than this host's available memory (" + format_size(host.mem_available) +
                           "): a full /dev/shm would push the host into swap or OOM");
  }

  std::vector<std::string>& a = inv.argv;
  a = {inv.engine, "run"};
  // The plan's size, or one given with -e GPU_RUN_SHM_SIZE (the engine does not read that).
  if (inv.sized && (!request.shm_size || !engine_shm_size)) {
    a.push_back("--shm-size");
    a.push_back(engine_size(inv.applied_shm));
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
