#pragma once

#include <ctime>

#include "invocation.hpp"
#include "measured_run.hpp"
#include "perf_log.hpp"
#include "run_args.hpp"

namespace gpurun {

// The performance-log record of one measured run.
PerfRecord make_perf_record(const EngineInvocation& invocation, const WrapperOptions& options, const MeasuredRun& run,
                            std::time_t started);

// `gpu-run --record`: runs the engine as a child instead of exec'ing it, samples the
// container's /dev/shm at 100 Hz, appends one record to the performance log and returns the
// engine's exit code. Throws Error (exit 2) before starting anything when the log cannot be
// opened or the container would run detached.
int run_recorded(const EngineInvocation& invocation, const WrapperOptions& options, const Config& config);

}  // namespace gpurun
