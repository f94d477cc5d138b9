#include "guard/guard_perf_log.hpp"

#include <utility>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/program.hpp"

namespace gpurun {

PerfRecord guarded_run_record(const ContainerInfo& c, const Recorded& recorded, const ShmGrower& grower,
                              std::time_t ended) {
  PerfRecord r;
  r.time = utc_timestamp(ended);
  r.source = "gpu-run-ctl guard";
  r.engine = c.engine;
  r.container = c.id;
  r.image = c.image;
  if (recorded.record) {
    const DecisionRecord& d = *recorded.record;
    r.profile = d.profile;
    r.gpus = d.gpus;
    r.workers = d.workers;
    r.batch_size = d.batch_size;
    r.planned_shm = d.size.value_or(0);
    r.applied_shm = d.size.value_or(0);
  } else {
    r.profile = recorded.legacy.profile.value_or("");
  }
  r.shm_size = grower.last_size();
  r.peak_shm = grower.peak_used();
  r.burst_shm = grower.burst();
  r.samples = grower.samples();
  r.growths = grower.growths();
  return r;
}

void GuardPerfLog::on_end(const ContainerInfo& c, const ShmGrower& grower) {
  try {
    const Recorded recorded = read_recorded(c, kDecisionDir);
    if (grower.samples() == 0 || !recorded.sized()) return;
    const UniqueFd fd = open_perf_log(path_);
    append_perf_line(fd.get(), perf_record_line(guarded_run_record(c, recorded, grower, std::time(nullptr))), path_);
  } catch (const std::exception& e) {
    if (std::exchange(warned_, true)) return;
    print_warning("gpu-run-ctl", std::string("guard: no line in the performance log for container ") +
                                     c.id.substr(0, 12) +
                                     " (nor for later ones; profiles learn reads it): " + e.what());
  }
}

}  // namespace gpurun
