#pragma once

// gpu-run-ctl guard's health, from the progress of its two loops: the sampler (a pass over every
// guarded container each --interval) and the discovery (a pass of the task watch every 100 ms, or
// of the engine's CLI poll every 2 s). A loop stuck in a remount, an inspect or a lock makes no
// more passes, while the metrics table it last wrote keeps answering: GET /healthz and /readyz
// answer from the age of each loop's last pass instead (the DaemonSet's liveness and readiness
// probes), and the metrics carry the time of each one's last pass.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "guard/metrics_server.hpp"

namespace gpurun {

// A moment on both clocks: the monotonic one for ages (a step of the wall clock is no stall),
// the wall clock for the metrics' timestamps.
struct GuardInstant {
  std::chrono::steady_clock::time_point steady;
  std::chrono::system_clock::time_point wall;
  static GuardInstant now();
};

// The node guard's time, injected so that a test moves it: `now` for its loops' passes and its
// probes, `sleep` between two samples (a stop signal ends it early).
struct GuardClock {
  std::function<GuardInstant()> now;
  std::function<void(std::chrono::nanoseconds)> sleep;
  // The steady and wall clocks, and nanosleep (EINTR returns early: the caller checks its stop).
  static GuardClock system();
};

// How old a loop's last pass may be before the guard is unhealthy: three of its periods, and at
// least 10 s (a machine under load, a burst of new containers to inspect).
std::chrono::nanoseconds stale_after(std::chrono::nanoseconds period);

// One loop as a probe sees it.
struct LoopAge {
  const char* name;                             // "sampler" or "discovery"
  std::optional<std::chrono::nanoseconds> age;  // since its last pass; nullopt: none yet
  std::chrono::nanoseconds period;              // how often it makes a pass
};

// GET /healthz (liveness): 503 naming each loop whose last pass is older than stale_after(its
// period), or that has made none in that long since the guard started (`uptime`); else 200.
// GET /readyz (`readiness`): 503 as well until each loop has made its first pass. The body: a
// verdict line ("ok", "stale: sampler", "starting: discovery"), then a line a loop with its age
// and its threshold.
HttpAnswer guard_health(const LoopAge& sampler, const LoopAge& discovery, std::chrono::nanoseconds uptime,
                        bool readiness);

// The two loops' last passes, written by their threads and read by the metrics server's (atomics:
// a probe never waits for a loop, least of all a stuck one).
class GuardProgress {
 public:
  GuardProgress(GuardInstant start, std::chrono::nanoseconds sample_period, std::chrono::nanoseconds discovery_period);

  // A loop finished a pass at `at`; the discovery's period changes when it goes from polling the
  // engine's CLI to watching its directories.
  void sampled(GuardInstant at);
  void discovered(GuardInstant at, std::chrono::nanoseconds period);

  HttpAnswer health(std::chrono::steady_clock::time_point now, bool readiness) const;

  // Unix time in seconds of each loop's last pass; 0 before its first.
  double last_sample_seconds() const;
  double last_discovery_seconds() const;

 private:
  struct Loop {
    std::atomic<std::int64_t> steady_ns{0};  // 0: no pass yet
    std::atomic<std::int64_t> wall_ns{0};
    std::atomic<std::int64_t> period_ns{0};
    void passed(GuardInstant at);
    LoopAge age(const char* name, std::chrono::steady_clock::time_point now) const;
  };
  std::chrono::steady_clock::time_point start_;
  Loop sampler_;
  Loop discovery_;
};

}  // namespace gpurun
