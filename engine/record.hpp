#pragma once

#include <ctime>

#include "engine/invocation.hpp"
#include "engine/measured_run.hpp"
#include "engine/run_args.hpp"
#include "shm/perf_log.hpp"

namespace gpurun {

// The performance-log record of one measured run.
PerfRecord make_perf_record(const EngineInvocation& invocation, const WrapperOptions& options, const MeasuredRun& run,
                            std::time_t started);

// `gpu-run --record` and `--guard`: runs the engine as a child instead of exec'ing it, samples
// the container's /dev/shm at 100 Hz; --record appends one record to the performance log,
// --guard grows /dev/shm before it fills (guard.hpp). Says on stderr when the job ran out of
// /dev/shm (shm_exhaustion_report) and returns the engine's exit code. Throws Error (exit 2)
// before starting anything when the log cannot be opened, the container would run detached,
// or (--guard) it gets no /dev/shm of its own.
int run_recorded(const EngineInvocation& invocation, const WrapperOptions& options, const Config& config);

}  // namespace gpurun
