#include "shm/shm_resize.hpp"

#include "base/units.hpp"
#include "decision/sizing.hpp"

namespace gpurun {

ResizePlan plan_resize(const IpcMode& ipc, const ShmFacts& shm, const ResizeAsk& ask) {
  ResizePlan plan;
  plan.size = ask.size;
  const auto refuse = [&](RefusalKind kind) {
    Refusal r;
    r.kind = kind;
    r.size = ask.size;
    r.container = ask.container;
    r.ipc_owner = ipc.owner;
    r.used = shm.used;
    r.current = shm.size;
    r.memory_limit = ask.memory_limit.value_or(0);
    r.memory_fraction_max = ask.memory_fraction_max;
    plan.refusal = r;
    return plan;
  };
  if (ipc.kind == IpcKind::kNone) return refuse(RefusalKind::kNoShm);
  if (ipc.kind == IpcKind::kHost || shm.host_ipc) return refuse(RefusalKind::kHostIpc);
  if (shm.host_shm) return refuse(RefusalKind::kHostShmBound);
  if (ipc.kind == IpcKind::kJoined) return refuse(RefusalKind::kJoinedTwice);
  if (ipc.kind == IpcKind::kOther) return refuse(RefusalKind::kUnknownIpc);
  if (!shm.tmpfs_mount) return refuse(RefusalKind::kNotTmpfs);
  if (ask.size < kMiB) return refuse(RefusalKind::kBelowMiB);
  if (ask.size < shm.used) return refuse(RefusalKind::kBelowUsed);
  if (ask.memory_limit && !MemoryBudget{*ask.memory_limit, ask.memory_fraction_max}.holds(ask.size)) {
    plan.over_budget = true;
    if (!ask.force) return refuse(RefusalKind::kResizeOverBudget);
  }
  plan.allow_shrink = ask.size < shm.size;
  return plan;
}

}  // namespace gpurun
