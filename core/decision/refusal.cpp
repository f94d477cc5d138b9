#include "decision/refusal.hpp"

#include <cstdio>

#include "base/units.hpp"
#include "decision/sizing.hpp"

namespace gpurun {

const RequestWords kContainerWords = {
    "gpus",
    "workers",
    "batch-size",
    "shm-size",
    "the memory limit",
    "the pod's memory limit",
    "give the container a memory limit",
    engine_size,
    nullptr,
};

namespace {

// The keys a person can lower: workers above 0, a batch above 1 ("workers (now 8) or batch-size
// (now 64)", without the values unless `now`), or "" when neither can.
std::string lowerable(const Refusal& r, const RequestWords& w, bool now) {
  auto key = [now](const char* name, std::uint64_t value) {
    return std::string(name) + (now ? " (now " + std::to_string(value) + ")" : "");
  };
  std::string out;
  if (r.workers > 0) out = key(w.workers, r.workers);
  if (r.batch_size > 1) out += (out.empty() ? "" : " or ") + key(w.batch_size, r.batch_size);
  return out;
}

}  // namespace

std::string refusal_words(const Refusal& r, const RequestWords& w) {
  switch (r.kind) {
    case RefusalKind::kAboveMaxShm: {
      const std::string lower = lowerable(r, w, /*now=*/false);
      return "planned /dev/shm of " + format_size(r.size) + " for profile " + r.profile + " (" +
             counted(r.ranks, "rank") + " x " + counted(r.workers, "worker") + " x batch " +
             std::to_string(r.batch_size) + ") is above the profile's max_shm " + format_size(r.max_shm) + ": " +
             (lower.empty() ? "" : "lower " + lower + ", or ") + "raise max_shm in the profile";
    }
    case RefusalKind::kOverBudget: {
      const MemoryBudget budget{r.memory_limit, r.memory_fraction_max};
      const std::string raise = std::string(": raise ") + (r.pod_limit ? w.pod_memory_limit : w.memory_limit) +
                                " to at least " + w.size(budget.limit_for(r.size));
      if (!r.planned)
        return std::string(w.shm_size) + " " + format_size(r.size) + " " + budget.over() + raise + " or ask for less";
      // Only what can lower the size: at the profile's min_shm, the job's keys cannot.
      std::string line = "planned /dev/shm of " + format_size(r.size) + " " + budget.over() + raise;
      const std::string lower = lowerable(r, w, /*now=*/true);
      if (r.size <= r.min_shm)
        line += ", or lower min_shm in profile " + r.profile + " (the plan sits at it; the job's terms need " +
                format_size(r.need) + ")";
      else if (!lower.empty())
        line += ", or lower " + lower;
      return line;
    }
    case RefusalKind::kVllmTensorParallel:
      return "profile " + r.profile + ": vLLM's engines.vllm.tensor_parallel_size " +
             std::to_string(r.tensor_parallel) + " does not divide the " + std::to_string(r.ranks) +
             " GPU(s) of the plan (vLLM's world is tensor x pipeline parallel): request a multiple of it with " +
             w.gpus + ", or change tensor_parallel_size in the profile";
    case RefusalKind::kRayNoMemoryLimit: {
      char fraction[32];
      std::snprintf(fraction, sizeof fraction, "%g", r.object_store_fraction);
      return "profile " + r.profile + ": Ray's object store defaults to " + fraction +
             " of the container's memory (engines.ray.object_store_fraction) and the plan has no memory limit to take "
             "it "
             "from: " +
             w.plan_with_limit + ", or set engines.ray.object_store_memory in the profile";
    }
    case RefusalKind::kNoShm:
      return "container " + r.container +
             " has --ipc=none: it has no /dev/shm to resize (recreate it with --ipc=private)";
    case RefusalKind::kHostIpc:
      return "container " + r.container +
             " shares the host's IPC namespace (--ipc=host): the host's /dev/shm is never resized";
    case RefusalKind::kHostShmBound:
      return "container " + r.container +
             " has the host's /dev/shm bound in (-v /dev/shm:/dev/shm): the host's /dev/shm is never resized";
    case RefusalKind::kJoinedTwice:
      return "container " + r.container + " joined the IPC namespace of container " + r.ipc_owner +
             ", which itself joined another: resize the one that owns it";
    case RefusalKind::kUnknownIpc:
      return "container " + r.container + ": unknown IPC mode, not resizing its /dev/shm";
    case RefusalKind::kNotTmpfs:
      return "/dev/shm in container " + r.container + " is not a tmpfs mount of its own: nothing to resize";
    case RefusalKind::kBelowMiB:
      return "size " + format_size(r.size) + " is below 1MiB";
    case RefusalKind::kBelowUsed:
      return "size " + format_size(r.size) + " is below what /dev/shm in container " + r.container +
             " holds now: " + format_size(r.used) + " used of " + format_size(r.current) + " (ask for at least " +
             w.size(round_up(r.used, kMiB)) + ", or remove files first)";
    case RefusalKind::kResizeOverBudget: {
      const MemoryBudget budget{r.memory_limit, r.memory_fraction_max};
      return "/dev/shm " + format_size(r.size) + " for container " + r.container + " " + budget.over() + "; " +
             w.force + " resizes anyway, or raise the limit to " + w.size(budget.limit_for(r.size));
    }
  }
  return "refused";
}

}  // namespace gpurun
