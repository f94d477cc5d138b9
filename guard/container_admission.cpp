#include "guard/container_admission.hpp"

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/shm_decision.hpp"

namespace gpurun {
namespace {

std::uint64_t env_size(const ContainerInfo& c, const char* name) {
  const auto it = c.env.find(name);
  if (it == c.env.end()) return 0;
  try {
    return parse_size(it->second.substr(0, 64), name);
  } catch (const Error&) {
    return 0;
  }
}

// A pod's memory-backed emptyDir at /dev/shm (the webhook's route: docs/ARCHITECTURE.md, "A
// pod's memory-backed emptyDir"). The kubelet mounted it at its sizeLimit and evicts the pod at
// once when use passes that, so the guard never grows it past the sizeLimit the webhook recorded
// (its record's ceiling, else GPU_RUN_SHM_LIMIT); nor does it lower it to the plan: an unwritten
// tmpfs costs nothing, and a pod lowered would keep the plan whenever the guard is not running.
// Another emptyDir is never grown past the size it has. Returns the words for the note.
std::string empty_dir_limits(const ContainerInfo& c, const Recorded& recorded, GuardLimits& limits) {
  limits.size_limit = recorded.record ? recorded.record->ceiling : env_size(c, kEnvShmLimit);
  if (!limits.size_limit) {
    if (const auto now = shm_usage_of_pid(c.pid)) limits.size_limit = now->size;
    return "; a memory-backed emptyDir without a recorded sizeLimit, never grown past its " +
           format_size(limits.size_limit) + " (the kubelet would evict the pod past its sizeLimit)";
  }
  const std::uint64_t plan = recorded.record ? recorded.record->size.value_or(0) : env_size(c, kEnvShmSize);
  return "; a memory-backed emptyDir (the plan " + format_size(plan) +
         "), never made smaller, grown up to its sizeLimit " + format_size(limits.size_limit) +
         ", never past (the kubelet would evict the pod)";
}

// The budget of the container's own memory limit: the guard's fact, not the container's word.
std::optional<std::uint64_t> own_budget(const ContainerInfo& c, const Config& config) {
  if (!c.memory_limit || *c.memory_limit == 0) return std::nullopt;
  return MemoryBudget{*c.memory_limit, config.memory_fraction_max}.bytes();
}

GuardLimits limits_of_record(const ContainerInfo& c, const DecisionRecord& r, const std::string& where,
                             const AdmissionContext& ctx, std::string* note) {
  GuardLimits own;
  own.budget_bytes = own_budget(c, ctx.config);
  std::string profile_word;
  if (!r.profile.empty()) {
    try {
      own.max_shm = ctx.load_profile(r.profile).max_shm;
    } catch (const Error& e) {
      profile_word = "; its profile is not in this host's store (" + std::string(e.what()).substr(0, 160) + ")";
    }
  }
  const GuardLimits l = guard_limits_of_record(r, own, ctx.host_memory);
  if (note) {
    const std::uint64_t ceiling = growth_ceiling(l, 0);
    *note = (l.headroom ? "keeps " + format_size(l.headroom) + " free"
                        : "keeps " + std::to_string(static_cast<int>(ctx.config.guard.min_free_fraction * 100 + 0.5)) +
                              "% free") +
            " (recorded by " + (r.door.empty() ? std::string("a door") : r.door) + " in its " + where +
            (r.profile.empty() ? "" : ": profile " + r.profile) +
            (r.workers ? ", " + (r.gpus > 1 ? std::to_string(r.gpus) + " GPUs x " : std::string()) +
                             std::to_string(r.workers) + " workers x a batch of " + std::to_string(r.batch_size)
                       : std::string()) +
            ")" + (l.bound ? ", one batch near the plan's " + format_size(l.bound) : "") + ", grows up to " +
            (ceiling ? format_size(ceiling) : std::string("no ceiling")) + profile_word;
  }
  return l;
}

}  // namespace

OrWhy<ContainerInfo> guardable(ContainerInfo c, bool all, const Recorded& recorded) {
  using Why = OrWhy<ContainerInfo>;
  if (!c.running || c.pid <= 0) return Why::none("not running");
  if (!all && !recorded.sized())
    return Why::none(std::string("gpu-run did not size it (no ") + kDecisionKey + ", no " + kLabelProfile + " or " +
                     kLabelShmSize + " label or annotation, no " + kEnvProfile + " or " + kEnvShmSize +
                     "; --all guards it)");
  if (c.ipc.kind != IpcKind::kPrivate && c.ipc.kind != IpcKind::kShareable)
    return Why::none("--ipc " + ipc_mode_name(c.ipc).substr(0, 80) + ": no /dev/shm of its own to grow");
  return c;
}

OrWhy<ContainerInfo> guardable(ContainerInfo c, bool all) {
  const Recorded recorded = read_recorded(c, {});
  return guardable(std::move(c), all, recorded);
}

std::optional<GuardPlanInputs> guard_plan_inputs(const ContainerInfo& c, const Config& config) {
  // What gpu-run recorded in the old keys, read and parsed by core's one adapter.
  const ContainerRequest recorded = read_recorded(c, {}).legacy;
  if (!recorded.profile || !recorded.workers || !recorded.batch_size) return std::nullopt;
  SpecFacts spec;
  spec.memory_limit = c.memory_limit;
  try {
    GuardPlanInputs in;
    in.profile = *recorded.profile;
    in.request = sizing_request(recorded, spec, HostFacts{}, config);
    if (in.request.workers.value_or(0) == 0) return std::nullopt;
    in.workers = *in.request.workers;
    in.batch_size = in.request.batch_size.value_or(0);
    in.gpus = in.request.gpus;
    return in;
  } catch (const Error&) {
    return std::nullopt;
  }
}

GuardLimits container_guard_limits(const ContainerInfo& c, const Recorded& recorded, const AdmissionContext& ctx,
                                   std::string* note) {
  if (recorded.record) return limits_of_record(c, *recorded.record, recorded.where, ctx, note);
  std::string why_not;
  if (const auto in = guard_plan_inputs(c, ctx.config)) {
    try {
      ShmPlan plan = plan_shm(ctx.load_profile(in->profile), in->request);
      plan.host_memory = ctx.host_memory;
      const GuardLimits limits = guard_limits(plan);
      if (limits.headroom) {
        if (note)
          *note = "keeps " + format_size(limits.headroom) + " free (profile " + in->profile + ", " +
                  (in->gpus > 1 ? std::to_string(in->gpus) + " GPUs x " : "") + std::to_string(in->workers) +
                  " workers x a batch of " + std::to_string(in->batch_size) + ")" +
                  (limits.bound ? ", one batch near the plan's " + format_size(limits.bound) : "");
        return limits;
      }
      why_not = "the plan has no batch bytes";
    } catch (const Error& e) {
      why_not = e.what();
    }
  } else if (const std::string profile = recorded.legacy.profile.value_or(""); !profile.empty()) {
    // A profile without workers and batch size cannot be planned, but a name no store knows is
    // still worth a word: the container asked for something that does not exist.
    try {
      ctx.load_profile(profile);
      why_not = "profile " + profile.substr(0, 80) + ", but no " + kEnvNumWorkers + " and " + kEnvBatchSize +
                " in its environment";
    } catch (const Error& e) {
      why_not = std::string("its profile cannot be used: ") + e.what();
    }
  } else {
    why_not = "no profile, workers and batch size in its environment";
  }
  if (!recorded.error.empty()) why_not = recorded.error.substr(0, 200) + "; " + why_not;
  GuardLimits limits;
  limits.budget_bytes = own_budget(c, ctx.config);
  limits.host_memory = ctx.host_memory;
  if (note)
    *note = "keeps " + std::to_string(static_cast<int>(ctx.config.guard.min_free_fraction * 100 + 0.5)) + "% free (" +
            why_not + ")";
  return limits;
}

GuardLimits container_guard_limits(const ContainerInfo& c, const Config& config,
                                   const std::function<Profile(const std::string&)>& load_profile, std::string* note) {
  AdmissionContext ctx;
  ctx.config = config;
  ctx.load_profile = load_profile;
  return container_guard_limits(c, read_recorded(c, {}), ctx, note);
}

OrWhy<Admitted> admit(ContainerInfo container, const AdmissionContext& ctx) {
  const Recorded recorded = read_recorded(container, ctx.decision_dir);
  OrWhy<ContainerInfo> taken = guardable(std::move(container), ctx.all, recorded);
  if (!taken) return OrWhy<Admitted>::none(taken.why);
  ContainerInfo& c = *taken;
  Admitted a;
  a.limits = container_guard_limits(c, recorded, ctx, &a.note);
  if (c.shm_empty_dir) a.note += empty_dir_limits(c, recorded, a.limits);
  a.profile = recorded.record ? recorded.record->profile : recorded.legacy.profile.value_or("");
  a.info = std::move(c);
  return a;
}

}  // namespace gpurun
