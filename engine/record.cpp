#include "engine/record.hpp"

#include <iostream>
#include <optional>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/program.hpp"
#include "base/units.hpp"
#include "shm/growth_policy.hpp"
#include "shm/shm_grower.hpp"
#include "shm/timeline.hpp"

namespace gpurun {

PerfRecord make_perf_record(const EngineInvocation& inv, const WrapperOptions& o, const MeasuredRun& run,
                            std::time_t started) {
  PerfRecord r;
  r.time = utc_timestamp(started);
  r.source = o.record ? "gpu-run --record" : "gpu-run --guard";
  r.engine = inv.engine;
  r.container = run.container_id;
  r.image = o.image;
  r.profile = inv.plan.profile;
  r.gpus = inv.plan.gpus;
  r.workers = inv.plan.workers;
  r.batch_size = inv.plan.batch_size;
  r.prefetch_factor = inv.plan.prefetch_factor;
  if (!inv.plan.loaders.empty()) r.pin_thread = inv.plan.loaders.front().pin_thread;
  r.planned_shm = inv.plan.shm;
  r.applied_shm = inv.applied_shm;
  r.shm_size = run.shm.size;
  r.peak_shm = run.shm.peak;
  r.burst_shm = run.shm.burst;
  r.samples = run.shm.samples;
  r.duration_s = run.wall_seconds;
  r.exit_status = run.exit_code;
  return r;
}

int run_recorded(const EngineInvocation& inv, const WrapperOptions& o, const Config& config) {
  const std::string flag = o.guard ? "--guard" : "--record";
  // watch only looks: a detached job that should grow needs the node guard, which grows every
  // running container gpu-run labelled.
  if (detaches(o.engine_options))
    throw usage_error(flag + ": the container would run detached (-d), so gpu-run could not see it end; drop -d " +
                      (o.guard ? "(or run it detached without --guard, and let the node guard grow it: gpu-run-ctl "
                                 "guard, the gpu-run-guard service)"
                               : "(or follow a detached container with gpu-run-ctl watch)"));
  if (o.guard && !inv.sized)
    throw usage_error(
        "--guard: the container does not get a /dev/shm of its own (--ipc host|none|container:X, or the "
        "host's bound in), so there is nothing to grow");
  // Opened before the job starts: a log that cannot be written fails --record now, not after
  // hours. --guard alone writes its line when it can (profiles learn reads it) and guards anyway.
  fs::path log_path;
  UniqueFd log;
  try {
    log_path = perf_log_path(config);
    log = open_perf_log(log_path);
  } catch (const Error& e) {
    if (o.record) throw;
    print_warning("gpu-run", std::string("--guard: no line in the performance log for this run: ") + e.what());
  }
  std::optional<ShmGrower> guard;
  if (o.guard) guard.emplace(config.guard, guard_limits(inv.plan), config);
  Timeline timeline;
  MeasureOptions mo;
  mo.user_cidfile = find_cidfile_option(o.engine_options);
  mo.on_sample = [&](int pid, const std::string& id, const ShmUsage& u, const ShmSampleStats& s) {
    if (o.timeline) timeline.add(s.seconds, u.size, u.used);
    if (guard) guard->on_sample(pid, id, u);
  };
  std::cout.flush();
  const std::time_t started = std::time(nullptr);
  const MeasuredRun run = run_measured(inv.argv, inv.engine, mo);
  if (!run.sample_error.empty())
    print_warning("gpu-run", std::string(flag) + ": " + run.sample_error);
  else if (!run.container_seen)
    print_warning("gpu-run", std::string(flag) + ": the container was never seen running; recording a peak of 0");
  PerfRecord record = make_perf_record(inv, o, run, started);
  if (guard) record.growths = guard->growths();
  if (log) {
    try {
      append_perf_line(log.get(), perf_record_line(record), log_path);
    } catch (const Error& e) {
      if (o.record) throw;
      print_warning("gpu-run", std::string("--guard: ") + e.what());
    }
  }
  if (o.record) {
    std::cerr << "gpu-run: recorded peak /dev/shm " << format_size(run.shm.peak) << " of "
              << format_size(run.shm.size ? run.shm.size : inv.applied_shm) << " (" << run.shm.samples
              << " samples, exit " << run.exit_code << ") in " << log_path.string() << "\n";
  }
  if (guard)
    std::cerr << "gpu-run: --guard: peak /dev/shm " << format_size(run.shm.peak) << " of " << format_size(run.shm.size)
              << " (" << guard->growths() << (guard->growths() == 1 ? " growth" : " growths") << " from "
              << format_size(inv.applied_shm) << ", exit " << run.exit_code << ")\n";
  std::cerr << shm_exhaustion_report({run.exit_code, run.shm.peak, run.shm.size, run.shm.last_used, inv.plan.shm},
                                     guard_headroom(inv.plan), inv.plan.profile);
  if (o.timeline) {
    write_timeline_svg(
        *o.timeline, timeline.points(),
        "/dev/shm of " + o.image + " (profile " + inv.plan.profile + ", exit " + std::to_string(run.exit_code) + ")");
    std::cerr << "gpu-run: timeline of /dev/shm in " << *o.timeline << "\n";
  }
  return run.exit_code;
}

}  // namespace gpurun
