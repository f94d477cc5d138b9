#include "shm/shm_sampler.hpp"

#include <sys/statvfs.h>
#include <time.h>

#include <cerrno>
#include <string>

#include "base/error.hpp"

namespace gpurun {
namespace {

std::chrono::nanoseconds monotonic_now() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

struct timespec to_timespec(std::chrono::nanoseconds t) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(t.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(t.count() % 1000000000);
  return ts;
}

}  // namespace

ShmSampleStats sample_shm(const std::function<std::optional<ShmUsage>()>& read, const SamplerOptions& o) {
  ShmSampleStats stats;
  const auto interval = o.interval.count() > 0 ? o.interval : std::chrono::nanoseconds(1);
  std::chrono::nanoseconds first{0};
  LargestRise rise;
  std::chrono::nanoseconds next = monotonic_now();
  for (;;) {
    if (o.stop && o.stop()) break;
    const std::optional<ShmUsage> usage = read();
    const auto now = monotonic_now();
    if (!usage) {
      stats.gone = true;
      break;
    }
    if (stats.samples == 0) first = now;
    rise.add(usage->used);
    stats.burst = rise.largest;
    ++stats.samples;
    stats.size = usage->size;
    stats.last_used = usage->used;
    if (usage->used > stats.peak) stats.peak = usage->used;
    stats.seconds = std::chrono::duration<double>(now - first).count();
    if (o.on_sample) o.on_sample(*usage, stats);
    next += interval;
    // Behind schedule (a slow callback, a stopped process): start again from now rather
    // than firing a burst of samples to catch up.
    if (next < now) next = now;
    const struct timespec deadline = to_timespec(next);
    // EINTR (a signal for the caller) returns early so that `stop` is checked at once.
    ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr);
  }
  return stats;
}

ShmSampleStats sample_shm_of_pid(int pid, const SamplerOptions& options) {
  if (pid <= 0) throw Error("sample /dev/shm: the container has no process (pid " + std::to_string(pid) + ")");
  const std::string path = "/proc/" + std::to_string(pid) + "/root/dev/shm";
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0 && errno != ENOENT && errno != ESRCH) {
    const int err = errno;
    throw system_error(
        "read " + path +
            (err == EACCES || err == EPERM ? " (reading a container's /dev/shm needs root or the container's user)"
                                           : ""),
        err);
  }
  // The path walked each sample (the engine may report the pid before its /dev/shm is mounted),
  // with a pidfd: a reading is never of another process that took the pid after the container
  // ended (pid_max is 32768 on many hosts).
  const ShmHandle shm(pid, ShmHandle::Mode::kWalk);
  return sample_shm([&shm] { return shm.sample(); }, options);
}

}  // namespace gpurun
