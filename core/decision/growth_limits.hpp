#pragma once

// How far the guard may grow one container's /dev/shm, from its plan: the limits (the plan's
// headroom and need, max_shm, the memory budget, an emptyDir's sizeLimit, a recorded ceiling)
// and the ceiling they make. Pure. When to grow within them is shm/growth_policy.hpp.

#include <cstdint>
#include <optional>
#include <string>

#include "decision/sizing.hpp"

namespace gpurun {

// The host config's "guard" knobs.
struct GuardPolicy {
  // Without a plan, the free space to keep: this share of the current size.
  double min_free_fraction = 0.25;
  // Every growth adds at least this share of the current size.
  double step_fraction = 0.5;
};

// What bounds the growth of one container's /dev/shm.
struct GuardLimits {
  // The next allocations, when the plan knows them (guard_headroom); 0: unknown.
  std::uint64_t headroom = 0;
  // The plan's need (ShmPlan::need) and its largest batch, when the headroom is known and the
  // profile is one the user chose (never set without the headroom); 0: the growth is not
  // bounded by the plan.
  std::uint64_t bound = 0;
  std::uint64_t batch = 0;
  std::uint64_t max_shm = 0;                  // the profile's; 0: none
  std::optional<std::uint64_t> budget_bytes;  // MemoryBudget of the memory limit, when one is set
  // A pod's memory-backed emptyDir (the webhook's route): its sizeLimit, which the guard never
  // grows past (the kubelet evicts the pod when use passes it: docs/ARCHITECTURE.md, "A pod's
  // memory-backed emptyDir"); 0: not one.
  std::uint64_t size_limit = 0;
  // The ceiling the door that sized it recorded (decision_record.hpp), which the guard keeps
  // only below its own limits; 0: none.
  std::uint64_t recorded_ceiling = 0;
  // The host's memory: no /dev/shm grows past it, whatever the profile's max_shm; 0: unknown.
  std::uint64_t host_memory = 0;
};

// The most the guard may grow a container's /dev/shm of `size` to: the smallest of the
// profile's max_shm, the memory budget and the host's memory (growth_cap), never below `size`; `size` when neither is
// known (the guard keeps no ceiling of its own, but an emptyDir's sizeLimit must be one). The sizeLimit the webhook and
// `gpu-run-ctl k8s` write.
std::uint64_t growth_ceiling(const GuardLimits& limits, std::uint64_t size);

// The sizeLimit of a pod's memory-backed emptyDir planned at `size`: growth_ceiling of the
// profile's max_shm (0: none) and the budget of the container's memory limit as patched (none:
// no budget). What the webhook and `gpu-run-ctl k8s` write there and in GPU_RUN_SHM_LIMIT.
std::uint64_t empty_dir_size_limit(std::uint64_t size, std::uint64_t max_shm, std::optional<std::uint64_t> memory_limit,
                                   double memory_fraction_max);

// The free space the next allocations need: every worker of every rank collates a whole batch
// into /dev/shm at once, so workers x ranks x batch_bytes; 0 when the plan has no workers or
// no batch size (then the policy's fraction is used).
std::uint64_t guard_headroom(const ShmPlan& plan);

// The limits of a plan: its headroom, its need and largest batch (unless its profile is the
// built-in "default", a guess rather than a description of the job), max_shm, the memory budget,
// the host's memory.
GuardLimits guard_limits(const ShmPlan& plan);

// What bounds a container's growth, and its words: the smallest of the profile's max_shm, the
// memory budget, the host's memory, the recorded ceiling and an emptyDir's sizeLimit, whole MiB below it (a remount
// never lands between pages); UINT64_MAX when none is set.
struct GrowthCap {
  std::uint64_t bytes = UINT64_MAX;
  std::string by;
};
GrowthCap growth_cap(const GuardLimits& limits);

}  // namespace gpurun
