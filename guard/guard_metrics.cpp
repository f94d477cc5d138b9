#include "guard/guard_metrics.hpp"

#include <algorithm>

#include "serve/prometheus.hpp"

namespace gpurun {

std::string render_guard_metrics(const std::vector<GuardedShm>& containers, const GuardSelf& self) {
  PrometheusText out;
  out.family("gpu_run_guard_build_info", "gauge", "Always 1, labelled with the guard's version.");
  out.sample("gpu_run_guard_build_info", {{"version", self.version}}, std::uint64_t{1});
  // A stuck loop stops moving its timestamp while the rest of the table keeps answering.
  out.family("gpu_run_guard_last_sample_timestamp_seconds", "gauge",
             "Unix time of the sampler's last pass over the guarded containers (one every --interval); 0 before "
             "the first.");
  out.sample("gpu_run_guard_last_sample_timestamp_seconds", {}, self.last_sample);
  out.family("gpu_run_guard_last_discovery_timestamp_seconds", "gauge",
             "Unix time of the last pass looking for new containers (one every 100 ms watching, 2 s polling); 0 "
             "before the first.");
  out.sample("gpu_run_guard_last_discovery_timestamp_seconds", {}, self.last_discovery);
  out.family("gpu_run_guard_containers", "gauge", "Containers whose /dev/shm the guard samples.");
  out.sample("gpu_run_guard_containers", {}, static_cast<std::uint64_t>(containers.size()));
  struct Metric {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t GuardedShm::*value;
  };
  static const Metric kMetrics[] = {
      {"gpu_run_shm_size_bytes", "gauge", "Size of the container's /dev/shm (tmpfs size=).", &GuardedShm::size},
      {"gpu_run_shm_used_bytes", "gauge", "Bytes used in the container's /dev/shm at the last sample.",
       &GuardedShm::used},
      {"gpu_run_shm_peak_bytes", "gauge", "Highest use of the container's /dev/shm sampled since it was guarded.",
       &GuardedShm::peak},
      {"gpu_run_shm_growths_total", "counter", "Times the guard grew the container's /dev/shm.", &GuardedShm::growths},
      {"gpu_run_shm_growths_refused_total", "counter",
       "Times the container's /dev/shm had to grow and could not (max_shm, the memory budget, or a failed remount).",
       &GuardedShm::refusals},
      // The state the refusals count episodes of: a full /dev/shm whose growth was refused once
      // keeps its counter flat, so only this says it still cannot grow (the alert's condition).
      {"gpu_run_shm_growth_blocked", "gauge",
       "1 while the container's /dev/shm needs to grow and cannot (at max_shm, the memory budget or an emptyDir's "
       "sizeLimit, or after a failed remount); else 0.",
       &GuardedShm::blocked},
  };
  const auto labels = [](const GuardedShm& c) -> PrometheusLabels {
    if (c.pod.empty())
      return {{"container_id", c.id}, {"container_name", c.name}, {"profile", c.profile}, {"engine", c.engine}};
    return {{"namespace", c.pod_namespace}, {"pod", c.pod},         {"container", c.name},
            {"container_id", c.id},         {"profile", c.profile}, {"engine", c.engine}};
  };
  for (const Metric& m : kMetrics) {
    out.family(m.name, m.type, m.help);
    for (const GuardedShm& c : containers) out.sample(m.name, labels(c), c.*m.value);
  }
  out.family("gpu_run_shm_orphaned_bytes", "gauge",
             "Bytes held in the container's /dev/shm by engines' segments no process has open or mapped (what "
             "gpu-run-ctl reap would remove), counted every 10 s; absent until first counted.");
  for (const GuardedShm& c : containers)
    if (c.orphaned) out.sample("gpu_run_shm_orphaned_bytes", labels(c), *c.orphaned);
  return out.text();
}

void GuardMetrics::update(GuardedShm c) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = containers_.try_emplace(c.id, c);
  c.peak = std::max({c.peak, c.used, added ? 0 : it->second.peak});
  if (!added && !c.orphaned) c.orphaned = it->second.orphaned;
  it->second = std::move(c);
}

void GuardMetrics::set_orphaned(const std::string& id, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = containers_.find(id); it != containers_.end()) it->second.orphaned = bytes;
}

void GuardMetrics::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  containers_.erase(id);
}

std::string GuardMetrics::render(const GuardSelf& self) const {
  std::vector<GuardedShm> copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copy.reserve(containers_.size());
    for (const auto& [id, c] : containers_) copy.push_back(c);
  }
  return render_guard_metrics(copy, self);
}

}  // namespace gpurun
