#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpurun {

struct Config;

// What gpu-run-runtime needs from a runc command line.
struct RuntimeArgs {
  std::string subcommand;             // "create", "run", "start", ... ("" if none)
  std::optional<std::string> bundle;  // --bundle X, --bundle=X, -b X, -b=X (create/run only)
  std::optional<std::string> log;     // runc's global --log FILE
  std::string log_format = "text";    // runc's global --log-format text|json
};

// Writes an error where runc would: to the --log file in its format (containerd-shim
// reads it to tell `docker run` why the create failed). Never throws.
void report_runtime_error(const RuntimeArgs& args, const std::string& message);

// Reads runc's argv (without argv[0]): global options, then the subcommand and its options.
RuntimeArgs parse_runtime_args(const std::vector<std::string>& args);

// On create/run: sizes /dev/shm in <bundle>/config.json (tmpfs size=, or the hook injected
// at createRuntime), atomically. Returns false when the spec was left unchanged. Throws Error
// when an explicit request cannot be met (or on_error is fail). `config_file` is the path
// of `config`, handed to the injected hook as --config.
bool prepare_bundle(const std::string& bundle, const Config& config, const std::string& config_file);

// Resolves the real runtime to exec: the first of the config's `runtimes` found (absolute
// path or on PATH), never this binary itself. Throws Error when none is found.
std::string find_real_runtime(const std::vector<std::string>& candidates);

// gpu-run-runtime's flow; execs the real runtime (returns only by throwing).
[[noreturn]] void run_runtime(int argc, char** argv);

}  // namespace gpurun
