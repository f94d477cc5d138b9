#include "shm/shm_grower.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"
#include "base/file_lock.hpp"
#include "base/program.hpp"
#include "base/units.hpp"

namespace gpurun {

ShmGrower::ShmGrower(const GuardPolicy& policy, const GuardLimits& limits, const Config& config, std::string speaker,
                     std::chrono::milliseconds remount_deadline)
    : policy_(policy),
      limits_(limits),
      log_(config.log_file.string(), parse_log_level(config.log_level), "gpu-run"),
      speaker_(std::move(speaker)),
      host_dev_(host_shm_device()),
      helper_(hook_program_path(config.hook_path)),
      remount_deadline_(remount_deadline) {}

// "gpu-run: --guard" -> "gpu-run: warning: --guard: ": the program's name, then the warning.
std::string ShmGrower::warning() const {
  const auto colon = speaker_.find(": ");
  if (colon == std::string::npos) return speaker_ + ": warning: ";
  return speaker_.substr(0, colon) + ": warning: " + speaker_.substr(colon + 2) + ": ";
}

void ShmGrower::warn_once(const std::string& who, const std::string& why) {
  if (warned_) return;
  warned_ = true;
  log_.warn(who + " action=guard-blocked reason=" + log_quote(why));
  print_line(warning() + why);
}

namespace {

// A gpu-run-ctl resize of this /dev/shm in progress: false, and the next sample decides again.
// No lock directory (not root): the remount decides alone.
bool lock_shm(const std::string& container_id, std::optional<FileLock>& lock) {
  try {
    lock.emplace(shm_lock_path(container_id), false);
    return lock->locked();
  } catch (const Error&) {
    lock.reset();
    return true;
  }
}

}  // namespace

void ShmGrower::track_burst(int pid, const std::string& container_id, std::uint64_t used) {
  if (pid != burst_pid_ || container_id != burst_container_) {
    burst_pid_ = pid;
    burst_container_ = container_id;
    rise_ = {};
  }
  rise_.add(used);
}

void ShmGrower::on_sample(int pid, const std::string& container_id, const ShmUsage& usage) {
  // Before anything else: a rise seen while a remount runs is the one that matters most.
  track_burst(pid, container_id, usage.used);
  peak_used_ = std::max(peak_used_, usage.used);
  last_size_ = usage.size;
  ++samples_;
  if (job_) {
    // The sample was taken before the remount ended: the next one decides again.
    if (const auto done = job_->poll()) finish_remount(*done);
    return;
  }
  if (failed_) return;
  const GuardStep step = decide_guard(policy_, limits_, usage.size, usage.used, rise_.largest);
  const bool was_blocked = std::exchange(blocked_, step.action == GuardAction::kBlocked);
  if (step.action == GuardAction::kNone) return;
  const std::string who = "container=" + log_quote(container_id.substr(0, 64));
  if (step.action == GuardAction::kBlocked) {
    if (!was_blocked) ++refusals_;
    warn_once(who, step.reason);
    return;
  }
  if (!lock_shm(container_id, lock_)) return;
  job_who_ = who;
  job_step_ = step;
  job_usage_ = usage;
  try {
    job_ = std::make_unique<RemountJob>(helper_, RemountRequest{pid, step.size, /*allow_shrink=*/false, host_dev_},
                                        remount_deadline_);
  } catch (const Error& e) {
    RemountOutcome cannot_start;
    cannot_start.error = e.what();
    finish_remount(cannot_start);
  }
}

void ShmGrower::finish_remount(const RemountOutcome& outcome) {
  job_.reset();
  lock_.reset();
  const std::string& who = job_who_;
  const GuardStep& step = job_step_;
  if (!outcome.result) {
    // Gone meanwhile, or the system refused: the job is not ours to stop.
    failed_ = true;
    ++refusals_;
    log_.error(who + " action=fail by=guard size=" + engine_size(step.size) + " error=" + log_quote(outcome.error));
    print_line(warning() + "cannot grow /dev/shm to " + format_size(step.size) + ": " + outcome.error);
    return;
  }
  const ShmResult& r = *outcome.result;
  if (r.outcome != ShmOutcome::kResized) {
    failed_ = true;
    ++refusals_;
    log_.warn(who + " action=" + outcome_name(r.outcome) + " by=guard size=" + engine_size(step.size));
    print_line(warning() + "/dev/shm not grown (" + outcome_name(r.outcome) + ")");
    return;
  }
  ++growths_;
  log_.info(who + " action=resized by=guard size=" + engine_size(step.size) + " before=" + engine_size(r.before) +
            " after=" + engine_size(r.after) + " used=" + engine_size(round_up(job_usage_.used, kMiB)) +
            " headroom=" + engine_size(round_up(step.headroom, kMiB)) + (step.capped ? " capped=1" : ""));
  print_line(speaker_ + ": /dev/shm " + format_size(r.before) + " -> " + format_size(r.after) + " (" +
             format_size(job_usage_.used) + " used, the next allocations need " + format_size(step.headroom) +
             (step.capped ? "; " + step.reason : std::string()) + ")");
}

}  // namespace gpurun
