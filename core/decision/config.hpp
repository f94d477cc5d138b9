#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "decision/growth_limits.hpp"

namespace gpurun {

namespace fs = std::filesystem;

constexpr const char* kDefaultConfigPath = "/etc/gpu-run/config.json";

// What a door does when a host default (default_profile) cannot size a container: the config's
// on_error, "warn" (start it unsized, with a warning) or "fail" (fail its start).
enum class OnError { kWarn, kFail };

// Host configuration (/etc/gpu-run/config.json); defaults when the file is missing.
struct Config {
  std::optional<std::string> default_profile;  // null: containers that name nothing are left alone
  std::string engine = "docker";               // docker | podman
  std::string gpu_request;                     // docker | cdi | none; empty: by engine
  std::vector<fs::path> profile_dirs;
  std::vector<std::string> runtimes = {"runc"};
  fs::path hook_path;  // empty: gpu-run-hook next to the binary
  fs::path log_file = "/var/log/gpu-run.log";
  std::string log_level = "info";     // error | warn | info | debug
  OnError on_error = OnError::kWarn;  // for host-default sizing
  double memory_fraction_max = 0.5;   // shm may take at most this share of a memory limit
  fs::path perf_log;                  // empty: $XDG_STATE_HOME/gpu-run/perf.jsonl
  GuardPolicy guard;                  // gpu-run --guard: {"min_free_fraction", "step_fraction"}
  fs::path source;                    // the file read, empty when defaults
};

// The config path: `explicit_path` if given, else $GPU_RUN_CONFIG, else the default.
fs::path config_path(const std::optional<fs::path>& explicit_path);

// Loads the config. A missing file gives defaults; a malformed one, an unknown key or
// a bad value is an Error naming the file and the key.
Config load_config(const fs::path& path);

// The runtimes gpu-run-runtime passes a verb other than create/run to (state, start, kill,
// delete, ...): the config's `runtimes`; when the file cannot be read or is malformed, its
// `runtimes` key alone when that reads, else the default (runc). Never throws: a broken config
// never blocks a container's teardown (only a create may be refused for it).
std::vector<std::string> passthrough_runtimes(const fs::path& path);

// Parses config text (for tests and the loader).
Config parse_config(const std::string& text, const std::string& source);

// The GPU request mode in force for `engine`: the config's, or docker's --gpus for
// docker and CDI for podman.
std::string effective_gpu_request(const Config& config, const std::string& engine);

}  // namespace gpurun
