#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "decision/config.hpp"
#include "decision/growth_limits.hpp"
#include "decision/sizing.hpp"
#include "guard/container_admission.hpp"
#include "guard/guard_health.hpp"
#include "guard/metrics_server.hpp"
#include "oci/container.hpp"
#include "profiles/profile.hpp"

namespace gpurun {

// `gpu-run-ctl guard`: gpu-run --guard for every running container gpu-run sized (or every
// running container with --all), found by polling the engine, until SIGTERM or SIGINT.
struct GuardOptions {
  std::optional<std::string> engine;                 // default: the config's engine
  bool all = false;                                  // every running container, labelled or not
  std::string interval_ms = "10";                    // between two samples of each guarded container
  std::optional<std::string> metrics;                // ADDR of the Prometheus endpoint (metrics_server.hpp)
  bool metrics_public = false;                       // --metrics may be a non-loopback address
  std::string containerd_state = "/run/containerd";  // --engine containerd: where its tasks are
};

// What the guard watches, for its first line: "guarding the docker containers gpu-run sized"
// (with --all: "guarding every running docker container").
std::string guard_start_line(const std::string& engine, bool all);

// Why the node guard stopped guarding a container.
enum class StopReason {
  kExited,        // the engine no longer lists it
  kShmGone,       // its /dev/shm can no longer be sampled
  kStartedAgain,  // its id runs a new process, which is guarded instead
  kGuardStopped,  // the guard itself stops
};

// The reason as the guard's line says it: "exited", "its /dev/shm is gone", "started again",
// "guard stopped".
const char* stop_reason_text(StopReason why);

// Whether the hook's decision record of the container goes with it: yes when the container is
// gone; no when it started again (its restart wrote a new record first) or the guard stops (the
// next guard resumes it).
bool removes_decision_record(StopReason why);

// The node guard: gpu-run --guard for every running container gpu-run sized on this host.
class NodeGuard {
 public:
  // Checks the options against `config` (--interval, --metrics, --engine: a usage error naming
  // the flag); nothing starts yet.
  NodeGuard(GuardOptions options, Config config, GuardClock clock);

  // Guards until `stop` returns true (after StopOnSignal: stop_requested): takes the host's one
  // guard lock, serves --metrics, resumes the last guard's containers, then admits, samples and
  // grows them every --interval. Throws Error when it cannot start (another guard runs).
  void run(const std::function<bool()>& stop) const;

  const std::string& engine() const { return engine_; }
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  GuardOptions options_;
  Config config_;
  GuardClock clock_;
  std::string engine_;
  std::chrono::milliseconds interval_;
  std::optional<MetricsAddress> address_;
};

}  // namespace gpurun
