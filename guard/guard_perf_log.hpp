#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <utility>

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

// The node guard's performance log (kSystemPerfLog): a line for each container gpu-run sized
// that ends while guarded. Never throws: a log that cannot be written (a read-only root, as the
// DaemonSet's) is one warning on stderr the first time, then nothing.
class GuardPerfLog {
 public:
  explicit GuardPerfLog(std::filesystem::path path = kSystemPerfLog) : path_(std::move(path)) {}
  void on_end(const ContainerInfo& container, const ShmGrower& grower);

 private:
  std::filesystem::path path_;
  bool warned_ = false;
};

}  // namespace gpurun
