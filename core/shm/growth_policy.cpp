#include "shm/growth_policy.hpp"

#include <algorithm>
#include <cmath>

#include "base/units.hpp"

namespace gpurun {
namespace {

std::uint64_t fraction_of(std::uint64_t bytes, double fraction) {
  return static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) * fraction));
}

// SIGBUS as a shell reports it: 128 + 7.
constexpr int kExitSigbus = 135;

}  // namespace

namespace {

// The free space wanted at `used`, and whether the plan's bound still holds it (decide_guard).
struct Wanted {
  std::uint64_t headroom = 0;
  bool within_bound = false;
};

Wanted wanted_free(const GuardPolicy& policy, const GuardLimits& limits, std::uint64_t size, std::uint64_t used,
                   std::uint64_t burst) {
  Wanted w;
  const std::uint64_t fraction = fraction_of(size, policy.min_free_fraction);
  // One rise larger than every worker's batch at once: the plan does not describe this job.
  const bool plan_holds = burst <= limits.headroom;
  w.within_bound = limits.bound && used <= limits.bound && plan_holds;
  if (w.within_bound) {
    w.headroom = std::min(limits.headroom, std::max(limits.batch, limits.bound - used));
    return w;
  }
  if (limits.bound)
    w.headroom = std::max(limits.headroom, fraction);
  else
    w.headroom = limits.headroom ? limits.headroom : fraction;
  w.headroom = std::max(w.headroom, kGuardBurstSamples * burst);
  return w;
}

}  // namespace

GuardStep decide_guard(const GuardPolicy& policy, const GuardLimits& limits, std::uint64_t size, std::uint64_t used,
                       std::uint64_t burst) {
  GuardStep step;
  const Wanted wanted = wanted_free(policy, limits, size, used, burst);
  const bool within_bound = wanted.within_bound;
  step.headroom = wanted.headroom;
  const std::uint64_t free = size > used ? size - used : 0;
  if (free >= step.headroom) return step;

  const GrowthCap cap = growth_cap(limits);
  std::uint64_t want =
      round_up(std::max(used + 2 * step.headroom, size + fraction_of(size, policy.step_fraction)), kMiB);
  if (within_bound) want = std::min(want, round_up(std::max(limits.bound, used + step.headroom), kMiB));
  const std::string numbers =
      format_size(free) + " free of " + format_size(size) + ", the next allocations need " + format_size(step.headroom);
  const std::uint64_t top = cap.bytes;
  if (top <= size) {
    // Short only of what the burst asks: as far as the caps allow, but no refusal.
    if (burst && free >= wanted_free(policy, limits, size, used, 0).headroom) return step;
    step.action = GuardAction::kBlocked;
    step.reason = "/dev/shm cannot grow: " + numbers + ", and it is at " + cap.by;
    return step;
  }
  step.action = GuardAction::kGrow;
  step.size = std::min(want, top);
  if (want > top) {
    step.capped = true;
    step.reason = "wanted " + format_size(want) + ", capped by " + cap.by;
  }
  return step;
}

std::string shm_exhaustion_report(const ShmEnding& e, std::uint64_t headroom, const std::string& profile) {
  if (e.size == 0) return "";
  const bool sigbus = e.exit_code == kExitSigbus;
  const bool full_at_end = e.last_used >= e.size;
  const bool full_at_peak = e.exit_code != 0 && e.peak >= e.size;
  if (!sigbus && !full_at_end && !full_at_peak) return "";
  const bool full = full_at_end || e.peak >= e.size;
  // It ran out, so it needed more than it had: one batch per worker more, else twice as much.
  const std::uint64_t base = std::max(e.peak, e.size);
  const std::uint64_t grown = round_up(base + (headroom ? headroom : base), kMiB);
  const bool plan_floor = e.planned > grown;
  const std::uint64_t fits = plan_floor ? round_up(e.planned, kMiB) : grown;
  std::string out = "gpu-run: the job ran out of /dev/shm: ";
  if (sigbus) out += "it exited 135 (SIGBUS: a page of /dev/shm could not be had), ";
  out += "peak " + format_size(e.peak) + " of " + format_size(e.size) + (full ? " (100%)" : "") + "\n";
  out += "gpu-run: a size that would have fitted: at least " + format_size(fits) +
         (plan_floor ? std::string(" (gpu-run's plan for the same flags)")
                     : " (the size plus " + std::string(headroom ? "one batch per worker" : "as much again") + ")") +
         "\n";
  // A profile may be a built-in or another team's file: what a user can do is measure the job
  // into a profile of their own.
  out += "gpu-run: rerun with: gpu-run --shm-size " + engine_size(fits) +
         " ..., or gpu-run --guard ... to grow /dev/shm while it runs";
  out += profile.empty()
             ? ""
             : ", or measure the job into a profile of your own: gpu-run-ctl calibrate --out-profile NAME --profile " +
                   profile + " ... -- IMAGE COMMAND...";
  out += "\n";
  return out;
}

}  // namespace gpurun
