#pragma once

// What gpu-run-ctl guard --metrics serves: each guarded container's /dev/shm (size, used,
// peak, orphaned bytes), the guard's growths and refused growths, and whether it is blocked now; the guard's
// version and when its loops last made a pass (guard_health.hpp), in Prometheus' text format.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gpurun {

// One guarded container at its last sample.
struct GuardedShm {
  std::string id;  // full id
  std::string name;
  std::string profile;  // "" when gpu-run's label and env name none
  std::string engine;
  // A Kubernetes pod's container (the CRI annotations of its spec): its series carry namespace,
  // pod and container, the labels cAdvisor's and kube-state-metrics' series carry, instead of
  // container_name.
  std::string pod_namespace;
  std::string pod;
  std::uint64_t size = 0;
  std::uint64_t used = 0;
  std::uint64_t peak = 0;  // the highest use sampled since it was guarded
  std::uint64_t growths = 0;
  std::uint64_t refusals = 0;
  std::uint64_t blocked = 0;  // 1 while the guard cannot grow it when it should (ShmGrower::blocked)
  // Bytes of its /dev/shm's orphaned segments (guard_orphans.hpp); nullopt until first counted.
  std::optional<std::uint64_t> orphaned;
};

// The guard itself: its version (gpu_run_guard_build_info), and the Unix time in seconds of its
// sampler's and its discovery's last pass (0: none yet).
struct GuardSelf {
  std::string version = GPU_RUN_VERSION;
  double last_sample = 0;
  double last_discovery = 0;
};

// The exposition of `self`, then of `containers` (in that order): HELP and TYPE once per metric,
// then a line per container labelled container_id, container_name (or, for a pod's container,
// namespace, pod and container), profile and engine.
std::string render_guard_metrics(const std::vector<GuardedShm>& containers, const GuardSelf& self = GuardSelf{});

// The guarded containers as the sampler last saw them: written by the guard's loop, read by
// the server's threads (a copy under a mutex, then rendered outside it).
class GuardMetrics {
 public:
  // Adds or replaces the container's line; its peak is the highest `used` of every update, and its
  // orphaned bytes the last set_orphaned's.
  void update(GuardedShm container);
  // The orphaned bytes of a container already updated (else nothing).
  void set_orphaned(const std::string& id, std::uint64_t bytes);
  void remove(const std::string& id);
  std::string render(const GuardSelf& self) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, GuardedShm> containers_;
};

}  // namespace gpurun
