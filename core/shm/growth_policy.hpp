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
// The headroom is the plan's, and a plan may be a guess (the built-in "default" profile) with
// batches far smaller than the job's: bench/GUARD-FUZZ.md saw jobs started at 64 MiB under the
// guess die of SIGBUS while the guard grew, their workers having filled /dev/shm between two
// samples or during a remount. So the guard also keeps free kGuardBurstSamples times the largest
// rise of `used` it has seen between two consecutive samples of the container (the job's own
// burst, tracked by the caller): 4, because the margin the measurement above found enough was
// four samples (one batch per worker at the fastest fill, 43 ms), and a growth takes up to about
// that: up to a sample interval (10 ms) before a sample sees the free space short, then the
// remount (bench/guard/reaction: p99 1.3 ms on a quiet host, 47.8 ms with one spike on a loaded
// one, bench/GUARD.md and GUARD-compare.md). K x the largest single-sample rise is the stricter
// of the two measures (45 MiB x 4 = 180 MiB against the 110 MiB kept there).
// A plan that describes the job keeps its own headroom within its need, unless one rise was
// larger than that headroom: more than every worker's batch at once, so the plan is wrong.
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

#include "decision/growth_limits.hpp"

namespace gpurun {

// The free space kept is at least this many times the largest rise seen between two samples.
inline constexpr std::uint64_t kGuardBurstSamples = 4;

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
// headroom and min_free_fraction x size; without a plan, that fraction. `burst` is the largest
// rise of `used` between two consecutive samples of this container so far (0: none seen):
// the free space wanted is at least kGuardBurstSamples x burst, except within the bound while
// no rise was larger than the plan's headroom (then the plan stands: a zero burst changes nothing).
// Grows when the free space (size - used) falls below it: to used + 2 x that, at least
// size x (1 + step_fraction), while within the bound no further than the larger of the bound and
// used + the free space wanted, rounded up to MiB, never above max_shm, the budget nor an
// emptyDir's sizeLimit. Blocked when those leave no room, a size found at or above them
// included: a kGrow is always larger than `size`, so the guard never makes a /dev/shm smaller
// than it found it (fail-static: without the guard, every container keeps what its door gave).
// Blocked only when the free space is short of what it would want without the burst: a burst that
// asks more than the caps allow grows as far as they do, but is no refusal.
GuardStep decide_guard(const GuardPolicy& policy, const GuardLimits& limits, std::uint64_t size, std::uint64_t used,
                       std::uint64_t burst = 0);

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
