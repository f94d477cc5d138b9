#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "base/file_lock.hpp"
#include "base/log.hpp"
#include "decision/config.hpp"
#include "oci/container.hpp"
#include "shm/growth_policy.hpp"
#include "shm/remount_job.hpp"
#include "shm/shm_sampler.hpp"

namespace gpurun {

// gpu-run --guard's act step, fed every sample of a running container's /dev/shm: asks the
// policy (growth_policy.hpp) and remounts /dev/shm bigger through the remount helper
// (shm_remount.hpp; the config's hook_path, else gpu-run-hook next to this program), never
// smaller: the remount refuses a size below the current one. The remount runs while the caller
// goes on sampling (remount_job.hpp): on_sample starts it, and a later on_sample of the same
// container collects it, so a helper that hangs holds up this container alone until its
// `remount_deadline`, when it is killed and counted as a failed remount.
// Each growth is one host log line and one line on stderr; the first time /dev/shm cannot
// grow (or a remount fails) it logs why and warns once on stderr, then keeps quiet.
// It keeps the largest rise of `used` between two consecutive samples of the container (its
// burst, which the policy keeps free kGuardBurstSamples times over), reset when the samples come
// from another container or another process of it.
// One per container: `gpu-run --guard` has one, `gpu-run-ctl guard` one per guarded container.
// `speaker` starts its stderr lines ("gpu-run: --guard" for gpu-run; the host log lines are
// the same whoever drives it).
class ShmGrower {
 public:
  ShmGrower(const GuardPolicy& policy, const GuardLimits& limits, const Config& config,
            std::string speaker = "gpu-run: --guard", std::chrono::milliseconds remount_deadline = kRemountDeadline);

  // Never waits for a remount: while one runs, a sample only looks whether it has finished.
  void on_sample(int pid, const std::string& container_id, const ShmUsage& usage);

  // True while a remount it started has not finished.
  bool remounting() const { return job_ != nullptr; }

  unsigned growths() const { return growths_; }
  // What the samples saw: the most used and the last size of /dev/shm, and how many there were.
  std::uint64_t peak_used() const { return peak_used_; }
  std::uint64_t last_size() const { return last_size_; }
  std::uint64_t samples() const { return samples_; }
  // The largest rise of `used` between two consecutive samples of the current container.
  std::uint64_t burst() const { return rise_.largest; }
  // Times it had to grow and could not (blocked by max_shm, the budget or an emptyDir's sizeLimit, or a failed
  // remount): once per episode, until the free space suffices again.
  unsigned refusals() const { return refusals_; }
  // True while it cannot grow /dev/shm when it should: the last sample wanted a growth that
  // max_shm, the budget or an emptyDir's sizeLimit blocks, or a remount failed (it tries no more).
  bool blocked() const { return blocked_ || failed_; }

 private:
  std::string warning() const;
  void warn_once(const std::string& who, const std::string& why);
  void finish_remount(const RemountOutcome& outcome);
  void track_burst(int pid, const std::string& container_id, std::uint64_t used);

  GuardPolicy policy_;
  GuardLimits limits_;
  Logger log_;
  std::string speaker_;
  std::optional<dev_t> host_dev_;
  std::filesystem::path helper_;
  std::chrono::milliseconds remount_deadline_;
  // The remount in flight, the container's lock held for it, and what it was for.
  std::unique_ptr<RemountJob> job_;
  std::optional<FileLock> lock_;
  std::string job_who_;
  GuardStep job_step_;
  ShmUsage job_usage_;
  unsigned growths_ = 0;
  unsigned refusals_ = 0;
  std::uint64_t peak_used_ = 0;
  std::uint64_t last_size_ = 0;
  std::uint64_t samples_ = 0;
  // The container (id and pid) whose samples the burst is of, and its rises.
  std::string burst_container_;
  int burst_pid_ = 0;
  LargestRise rise_;
  bool blocked_ = false;  // the last sample wanted a growth it could not have
  bool warned_ = false;
  bool failed_ = false;  // a remount failed: no more tries
};

}  // namespace gpurun
