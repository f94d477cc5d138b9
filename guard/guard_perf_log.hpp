#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>

#include "decision/decision_record.hpp"
#include "oci/container.hpp"
#include "shm/perf_log.hpp"
#include "shm/shm_grower.hpp"

namespace gpurun {

// The node guard's line for a container that ended while it guarded it: the shape its door
// recorded (profile, GPUs, workers, batch size), the size it got, the peak and the growths
// the guard saw; no exit (the guard sees the container go, not its status). Pure.
PerfRecord guarded_run_record(const ContainerInfo& container, const Recorded& recorded, const ShmGrower& grower,
                              std::time_t ended);

// Appends that line to `log` (kSystemPerfLog): for a container gpu-run sized and the guard
// sampled. Never throws: a log that cannot be written is one warning on stderr.
void log_guarded_end(const ContainerInfo& container, const ShmGrower& grower,
                     const std::filesystem::path& log = kSystemPerfLog);

}  // namespace gpurun
