#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shm/shm_sampler.hpp"

namespace gpurun {

namespace fs = std::filesystem;

struct MeasureOptions {
  std::chrono::nanoseconds interval = std::chrono::milliseconds(10);  // 100 samples a second
  // The engine's stdout and stderr go to this file (stdin from /dev/null) instead of the caller's.
  std::optional<fs::path> output;
  // A --cidfile the user already gave the engine; else one in a private temp directory is added.
  std::optional<std::string> user_cidfile;
  // Called after every sample with the container's init pid and id, the reading and the
  // running totals (--timeline draws them, --guard grows /dev/shm).
  std::function<void(int pid, const std::string& container_id, const ShmUsage&, const ShmSampleStats&)> on_sample;
};

// One engine run with its /dev/shm sampled.
struct MeasuredRun {
  int exit_code = -1;           // the engine's (128+signal when killed)
  std::string container_id;     // empty when the container was never created
  bool container_seen = false;  // inspected while running, so sampled
  ShmSampleStats shm;
  double wall_seconds = 0;   // engine start to exit
  int interrupted_by = 0;    // SIGINT/SIGTERM/SIGHUP received meanwhile, else 0
  std::string sample_error;  // why /dev/shm could not be sampled, if it could not
};

// `argv` with `--cidfile PATH` inserted after "<engine> run".
std::vector<std::string> with_cidfile(const std::vector<std::string>& argv, const std::string& cidfile);

// The value of a --cidfile among the engine's run options, if any.
std::optional<std::string> find_cidfile_option(const std::vector<std::string>& engine_options);

// True when the engine's run options detach the container (-d, --detach, a cluster like -dit).
bool detaches(const std::vector<std::string>& engine_options);

// Runs `argv` (an `<engine> run ...` command) as a child, keeping the caller's terminal
// unless options.output; forwards SIGINT, SIGTERM and SIGHUP sent to this process to it
// (terminal-generated ones reach it through the process group already); waits for the
// cidfile, inspects the container once for its pid and samples its /dev/shm until it exits.
// Throws Error when the engine cannot be started.
MeasuredRun run_measured(const std::vector<std::string>& argv, const std::string& engine,
                         const MeasureOptions& options = {});

}  // namespace gpurun
