#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "engine/run_args.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gpurun {

namespace fs = std::filesystem;

// The gpu-run options of `calibrate` and `tune`, and what follows their `--`:
// `[docker run options] IMAGE CMD...`, split as gpu-run splits its own command line.
struct RunOptions {
  SizingFlags sizing;
  std::optional<std::string> engine;
  std::vector<std::string> args;  // after `--`
};

// The options add_sizing_flags registered, for a command whose flags mean a little more
// (k8s requires --profile and --gpus); `workers` is null when not registered.
struct SizingFlagOptions {
  CLI::Option* profile = nullptr;
  CLI::Option* gpus = nullptr;
  CLI::Option* workers = nullptr;
  CLI::Option* batch_size = nullptr;
  CLI::Option* prefetch_factor = nullptr;
  CLI::Option* gpu_request = nullptr;
  CLI::Option* profile_dir = nullptr;
};

// Registers gpu-run's sizing flags on `cmd`, filling `flags`: --profile, --gpus, --workers
// (unless `with_workers` is false), --batch-size, --prefetch-factor, --gpu-request and
// --profile-dir, each
// with its one help text.
SizingFlagOptions add_sizing_flags(CLI::App& cmd, SizingFlags& flags, bool with_workers = true);

// Registers the gpu-run options (without --workers when `with_workers` is false) and the
// trailing ARGS on `cmd`.
void add_run_options(CLI::App& cmd, RunOptions& options, bool with_workers = true);

// gpu-run's options for the run: the flags, plus gpu-run options found after `--` (an option
// given on both sides is an Error naming it). Adds --rm unless the engine options have it,
// so repeated runs leave no containers. Throws Error (exit 2) naming what is missing.
WrapperOptions wrapper_options_for(const RunOptions& options, const std::string& command);

// Where calibrate writes profiles by default: $XDG_CONFIG_HOME/gpu-run/profiles, else
// ~/.config/gpu-run/profiles. Throws Error when neither is set.
fs::path user_profile_dir(const EnvLookup& env = process_env);

}  // namespace gpurun
