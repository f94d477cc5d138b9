#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "oci/container.hpp"

namespace gpurun {

// The largest rise of use between two consecutive samples of one /dev/shm: a job's burst, which
// the guard keeps free kGuardBurstSamples times over and learn plans one of above the peak.
struct LargestRise {
  std::uint64_t largest = 0;
  std::optional<std::uint64_t> last;  // the previous sample's use

  void add(std::uint64_t used) {
    if (last && used > *last && used - *last > largest) largest = used - *last;
    last = used;
  }
};

// What sampling a container's /dev/shm found.
struct ShmSampleStats {
  std::uint64_t peak = 0;  // highest use seen, bytes
  std::uint64_t size = 0;  // the tmpfs size at the last sample
  std::uint64_t last_used = 0;
  std::uint64_t samples = 0;
  std::uint64_t burst = 0;  // the largest rise of use between two consecutive samples, bytes
  double seconds = 0;       // from the first sample to the last
  bool gone = false;        // ended because /dev/shm could no longer be read (the container exited)
};

struct SamplerOptions {
  std::chrono::nanoseconds interval = std::chrono::milliseconds(10);
  // Checked before every sample; returning true ends sampling (the caller's stop flag).
  std::function<bool()> stop;
  // Called after every sample with the reading and the running totals.
  std::function<void(const ShmUsage&, const ShmSampleStats&)> on_sample;
};

// Samples `read` every `interval` (absolute deadlines on CLOCK_MONOTONIC, so the rate does
// not drift) until it returns nullopt or `stop` says so. Never starts a process.
ShmSampleStats sample_shm(const std::function<std::optional<ShmUsage>()>& read, const SamplerOptions& options);

// Samples the /dev/shm of the container whose init is `pid` (statvfs through
// /proc/PID/root) until the process is gone. Throws Error when the first reading fails for
// another reason than the process being gone (e.g. EACCES: not root).
ShmSampleStats sample_shm_of_pid(int pid, const SamplerOptions& options);

}  // namespace gpurun
