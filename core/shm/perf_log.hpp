#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "base/env.hpp"
#include "base/fd.hpp"
#include "decision/config.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// The performance log the root node guard appends to (one for the host; `profiles learn` reads
// it besides the user's).
inline constexpr const char* kSystemPerfLog = "/var/lib/gpu-run/perf.jsonl";

// One line of the performance log that `gpu-run --record` and `--guard` and the node guard append
// when a container ends: what ran, the shape it was planned for, what it used.
struct PerfRecord {
  std::string time;    // UTC, 2026-12-02T15:48:08Z
  std::string source;  // who wrote it: "gpu-run --record", "gpu-run --guard", "gpu-run-ctl guard"
  std::string engine;
  std::string container;  // the engine's container id
  std::string image;
  std::string profile;
  unsigned gpus = 0;
  std::uint64_t workers = 0;
  std::uint64_t batch_size = 0;
  std::uint64_t prefetch_factor = 0;
  std::uint64_t planned_shm = 0;  // the model's plan
  std::uint64_t applied_shm = 0;  // what the container got (the plan, or the user's --shm-size)
  std::uint64_t shm_size = 0;     // the tmpfs size the sampler saw (0: never seen running)
  std::uint64_t peak_shm = 0;
  // The largest rise of use between two consecutive samples (0: none, or a line written before
  // it was recorded): how much a job can add between two looks, which learn's margin is made of.
  std::uint64_t burst_shm = 0;
  std::uint64_t samples = 0;
  double duration_s = 0;  // the engine's wall time
  unsigned growths = 0;   // the guard's growths of its /dev/shm
  // Whether the plan's first loader had a pin thread copying its batches out of /dev/shm (a
  // pinned loader with a GPU reaching the container); none: not known (the node guard's).
  std::optional<bool> pin_thread;
  std::optional<int> exit_status;  // none: not known (the node guard sees a container end, not its status)
};

// The record as one JSON object on one line, ending in '\n'.
std::string perf_record_line(const PerfRecord& record);

// Reads one line perf_record_line wrote (keys it does not know ignored, a missing one left at its
// default). Throws Error (exit 2) naming `where` (FILE:LINE) for a line that is not such a record.
PerfRecord parse_perf_record(const std::string& line, const std::string& where);

// Where records go: the config's perf_log, else $XDG_STATE_HOME/gpu-run/perf.jsonl, else
// ~/.local/state/gpu-run/perf.jsonl. Throws Error when neither XDG_STATE_HOME nor HOME is set.
fs::path perf_log_path(const Config& config, const EnvLookup& env = process_env);

// Opens (creating it and its directory) the log for appending. Throws Error naming the path.
UniqueFd open_perf_log(const fs::path& path);

// Appends `line` with a single write on an O_APPEND descriptor, so that concurrent jobs
// never interleave their records. Throws Error on a short write.
void append_perf_line(int fd, const std::string& line, const fs::path& path);

}  // namespace gpurun
