#pragma once

// The node guard's orphaned-bytes metric: the bytes in each guarded container's /dev/shm held by
// engines' segments no process has open or mapped (core/shm/shm_orphans.hpp, what
// `gpu-run-ctl reap` would remove). Finding who holds a segment walks every process's fd and
// maps in /proc, so it runs on a thread of its own every few seconds, never in the sampling loop.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "guard/guard_metrics.hpp"

namespace gpurun {

// The orphaned bytes of the /dev/shm of the process `pid` (its root's /dev/shm, no symlink
// followed), over the processes of `proc_fd` (an open /proc); nullopt when that /dev/shm cannot
// be read (the process has exited, or it has none). /proc is walked only when the /dev/shm holds
// an engine's segment unchanged for `min_age` (a candidate).
std::optional<std::uint64_t> orphaned_bytes_of_pid(int pid, int proc_fd, std::time_t min_age);

// How often each tracked container is counted, and how long a segment must be unchanged to
// count (reap's default --min-age).
constexpr std::chrono::milliseconds kOrphanScanEvery{10000};
constexpr std::time_t kOrphanMinAge = 60;

// Counts the orphaned bytes of every tracked container every `every` on its own thread and sets
// them in `metrics` (GuardMetrics::set_orphaned). Stops and joins on destruction.
class OrphanScanner {
 public:
  explicit OrphanScanner(GuardMetrics& metrics, std::chrono::milliseconds every = kOrphanScanEvery,
                         std::time_t min_age = kOrphanMinAge);
  ~OrphanScanner();
  OrphanScanner(const OrphanScanner&) = delete;
  OrphanScanner& operator=(const OrphanScanner&) = delete;

  void track(const std::string& id, int pid);
  void untrack(const std::string& id);
  // Passes made so far (each over every tracked container), for tests.
  unsigned passes() const;

 private:
  void run();

  GuardMetrics& metrics_;
  std::chrono::milliseconds every_;
  std::time_t min_age_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  unsigned passes_ = 0;
  std::map<std::string, int> tracked_;  // id -> pid
  std::thread thread_;
};

}  // namespace gpurun
