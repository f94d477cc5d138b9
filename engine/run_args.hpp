#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sizing_flags.hpp"

namespace gpurun {

// `gpu-run [gpu-run options] [engine run options] IMAGE [COMMAND [ARG...]]`, split.
struct WrapperOptions {
  SizingFlags sizing;                 // --profile, --gpus, --workers, ... --gpu-request, --profile-dir
  std::optional<std::string> engine;  // docker | podman
  bool dry_run = false;
  bool explain = false;
  bool json = false;
  bool help = false;
  bool version = false;
  bool record = false;
  bool guard = false;                       // --guard: grow /dev/shm while the job runs
  bool over_budget = false;                 // --over-budget: a person keeps --shm-size over the budget
  std::optional<std::string> timeline;      // --timeline FILE.svg (with --record or --guard)
  std::vector<std::string> engine_options;  // the engine's own run options, untouched
  std::string image;
  std::vector<std::string> command;
};

// Splits argv (without argv[0]). gpu-run's own options may appear anywhere before
// IMAGE; every other option goes to the engine with its value. Throws Error (exit 2)
// naming the flag on a missing value or a missing IMAGE.
WrapperOptions split_wrapper_args(const std::vector<std::string>& args);

// What the user's engine options say about /dev/shm, memory and CPUs.
struct EngineOptionFacts {
  std::optional<std::string> shm_size;        // --shm-size value
  std::optional<std::string> ipc;             // --ipc value
  bool host_shm_mount = false;                // -v /dev/shm:/dev/shm or a --mount onto /dev/shm
  std::string shm_bind_source;                // that bind's source ("" when a --mount names none)
  bool tmpfs_shm = false;                     // --tmpfs /dev/shm[:opts] or --mount type=tmpfs onto /dev/shm
  std::optional<std::string> tmpfs_shm_size;  // its size= (--tmpfs) or tmpfs-size= (--mount), as given
  std::string shm_size_flag;                  // how the user sized /dev/shm, for messages: "--shm-size 1g"
  std::optional<std::string> memory;          // --memory / -m
  std::optional<std::string> cpus;            // --cpus
  std::optional<std::string> cpuset_cpus;     // --cpuset-cpus
  bool gpus_given = false;                    // --gpus among engine options (cannot happen: ours)
  std::vector<std::string> env;               // each -e/--env, as given: NAME=VALUE or NAME
  std::vector<std::string> env_files;         // each --env-file
};

// Reads the engine options gpu-run must respect.
EngineOptionFacts scan_engine_options(const std::vector<std::string>& engine_options);

// Quotes one argument for a POSIX shell (only when needed).
std::string shell_quote(const std::string& arg);

}  // namespace gpurun
