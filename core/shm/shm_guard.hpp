#pragma once

// gpu-run --guard: when to grow a running container's /dev/shm and to what size, and what to
// say when a job ran out of it. Pure; the sampling and the remount are the engine's
// (measured_run.hpp) and core's (shm_remount.hpp).
//
// Measured (tests/integration/guard_test.sh, docs/guard-and-metrics.md): a real DataLoader (2 workers,
// 55 MiB batches of 96 x 3x224x224 float32) filled /dev/shm by at most 23-45 MiB per 10 ms
// sample and at most 1000-2542 MiB/s over 100 ms (two runs). Keeping one batch per worker
// (110 MiB) free leaves at least 43 ms, four samples at 100 Hz, to grow before an allocation
// can fail; each growth adds twice that headroom, so the job took three growths, not one per batch.
//
// With a profile that describes the job (named, not the built-in fallback "default"), growth
// also stops near the plan's need, its model of the job's peak (in-flight batches of every
// loader, their semaphores, NCCL): bench/torch found that need within 1.02-1.08x of the smallest
// size each case runs at, while headroom kept on top of the peak ended 1.4-2.2x above it
// (bench/GUARD.md). One batch stays free even there, so a plan short by a batch is seen before
// an allocation fails; once the job holds more than the need, the plan is wrong and the guard
// keeps the larger of the headroom and min_free_fraction free.

#include <cstdint>
#include <optional>
#include <string>

#include "sizing.hpp"

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
};

// The most the guard may grow a container's /dev/shm of `size` to: the smaller of the
// profile's max_shm and the memory budget, never below `size`; `size` when neither is known
// (the guard keeps no ceiling of its own, but an emptyDir's sizeLimit must be one). The
// sizeLimit the webhook and `gpu-run-ctl k8s` write.
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
// built-in "default", a guess rather than a description of the job), max_shm, the memory budget.
GuardLimits guard_limits(const ShmPlan& plan);

enum class GuardAction {
  kNone,     // enough free space
  kGrow,     // remount at `size`
  kBlocked,  // it should grow but may not (`reason` says why, with the numbers)
};

struct GuardStep {
  GuardAction action = GuardAction::kNone;
  std::uint64_t size = 0;      // the new size (kGrow)
  std::uint64_t headroom = 0;  // the free space wanted
  bool capped = false;         // kGrow: smaller than wanted, stopped by max_shm or the budget
  std::string reason;          // kBlocked, and kGrow when capped
};

// The free space wanted at `used`: with a bound and `used` within it, the headroom but no more
// than the bound still leaves, and at least one batch; past the bound, the larger of the
// headroom and min_free_fraction x size; without a plan, that fraction.
// Grows when the free space (size - used) falls below it: to used + 2 x that, at least
// size x (1 + step_fraction), while within the bound no further than the larger of the bound and
// used + the free space wanted, rounded up to MiB, never above max_shm, the budget nor an
// emptyDir's sizeLimit. Blocked when those leave no room, a size found at or above them
// included: a kGrow is always larger than `size`, so the guard never makes a /dev/shm smaller
// than it found it (fail-static: without the guard, every container keeps what its door gave).
GuardStep decide_guard(const GuardPolicy& policy, const GuardLimits& limits, std::uint64_t size, std::uint64_t used);

// How a guarded or recorded job ended.
struct ShmEnding {
  int exit_code = 0;
  std::uint64_t peak = 0;       // highest use sampled
  std::uint64_t size = 0;       // /dev/shm's size at the last sample
  std::uint64_t last_used = 0;  // use at the last sample
  std::uint64_t planned = 0;    // gpu-run's plan for the same flags (0: none)
};

// The lines gpu-run prints on stderr when the job ran out of /dev/shm: it exited 135
// (SIGBUS: a page of /dev/shm could not be had), it failed with /dev/shm full at its peak, or
// /dev/shm was full at the end. Says the peak, the size, a size that would have fitted (the
// larger of peak and size, plus `headroom` (one batch per worker), else twice it, rounded up
// to MiB: what it had was not enough), never below the plan for the same flags (a job given
// less than its plan, by --shm-size, has shown only that the plan was not too much), and the
// command to rerun with. Empty when the job did not run out.
std::string shm_exhaustion_report(const ShmEnding& ending, std::uint64_t headroom, const std::string& profile);

}  // namespace gpurun
