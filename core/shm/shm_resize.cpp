#include "shm/shm_resize.hpp"

#include "base/units.hpp"
#include "decision/sizing.hpp"

namespace gpurun {

ResizePlan plan_resize(const IpcMode& ipc, const ShmFacts& shm, const ResizeAsk& ask) {
  ResizePlan plan;
  plan.size = ask.size;
  plan.ipc = ipc;
  plan.shm = shm;
  plan.memory_limit = ask.memory_limit;
  plan.memory_fraction_max = ask.memory_fraction_max;
  const auto refuse = [&plan](ResizeRefusal why) {
    plan.refusal = why;
    return plan;
  };
  if (ipc.kind == IpcKind::kNone) return refuse(ResizeRefusal::kNoShm);
  if (ipc.kind == IpcKind::kHost || shm.host_ipc) return refuse(ResizeRefusal::kHostIpc);
  if (shm.host_shm) return refuse(ResizeRefusal::kHostShmBound);
  if (ipc.kind == IpcKind::kJoined) return refuse(ResizeRefusal::kJoinedTwice);
  if (ipc.kind == IpcKind::kOther) return refuse(ResizeRefusal::kUnknownIpc);
  if (!shm.tmpfs_mount) return refuse(ResizeRefusal::kNotTmpfs);
  if (ask.size < kMiB) return refuse(ResizeRefusal::kBelowMiB);
  if (ask.size < shm.used) return refuse(ResizeRefusal::kBelowUsed);
  if (ask.memory_limit && !MemoryBudget{*ask.memory_limit, ask.memory_fraction_max}.holds(ask.size)) {
    plan.over_budget = true;
    if (!ask.force) return refuse(ResizeRefusal::kOverBudget);
  }
  plan.allow_shrink = ask.size < shm.size;
  return plan;
}

}  // namespace gpurun
