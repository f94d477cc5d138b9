#include "shm_resize.hpp"

#include "sizing.hpp"
#include "units.hpp"

namespace gpurun {

ResizePlan plan_resize(const std::string& name, const IpcMode& ipc, const ShmFacts& shm, const ResizeAsk& ask) {
  ResizePlan plan;
  plan.size = ask.size;
  const std::string who = "container " + name;
  if (ipc.kind == IpcKind::kNone) {
    plan.refusal = who + " has --ipc=none: it has no /dev/shm to resize (recreate it with --ipc=private)";
    return plan;
  }
  if (ipc.kind == IpcKind::kHost || shm.host_ipc || shm.host_shm) {
    plan.refusal =
        who +
        (ipc.kind == IpcKind::kHost || shm.host_ipc ? " shares the host's IPC namespace (--ipc=host)"
                                                    : " has the host's /dev/shm bound in (-v /dev/shm:/dev/shm)") +
        ": the host's /dev/shm is never resized";
    return plan;
  }
  if (ipc.kind == IpcKind::kJoined) {
    plan.refusal = who + " joined the IPC namespace of container " + ipc.owner +
                   ", which itself joined another: resize the one that owns it";
    return plan;
  }
  if (ipc.kind == IpcKind::kOther) {
    plan.refusal = who + ": unknown IPC mode, not resizing its /dev/shm";
    return plan;
  }
  if (!shm.tmpfs_mount) {
    plan.refusal = "/dev/shm in " + who + " is not a tmpfs mount of its own: nothing to resize";
    return plan;
  }
  if (ask.size < kMiB) {
    plan.refusal = "size " + format_size(ask.size) + " is below 1MiB";
    return plan;
  }
  if (ask.size < shm.used) {
    plan.refusal = "size " + format_size(ask.size) + " is below what /dev/shm in " + who +
                   " holds now: " + format_size(shm.used) + " used of " + format_size(shm.size) +
                   " (ask for at least " + engine_size(round_up(shm.used, kMiB)) + ", or remove files first)";
    return plan;
  }
  if (ask.memory_limit) {
    const MemoryBudget budget{*ask.memory_limit, ask.memory_fraction_max};
    if (!budget.holds(ask.size)) {
      plan.over_budget = true;
      if (!ask.force) {
        plan.refusal = "/dev/shm " + format_size(ask.size) + " for " + who + " " + budget.over() +
                       "; --force resizes anyway, or raise the limit to " + engine_size(budget.limit_for(ask.size));
        return plan;
      }
    }
  }
  plan.allow_shrink = ask.size < shm.size;
  return plan;
}

}  // namespace gpurun
