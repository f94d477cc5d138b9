#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gpurun {

namespace fs = std::filesystem;

// The options every engine's `configure` takes for gpu-run-runtime's entry: --config (the gpu-run
// config the runtime reads), --runtime-path (`runtime_help`) and --undo (`undo_help`), which
// excludes both. Returns --undo, for the engine's own exclusions.
CLI::Option* add_entry_options(CLI::App& cmd, std::optional<std::string>& config,
                               std::optional<std::string>& runtime_path, const std::string& runtime_help, bool& undo,
                               const std::string& undo_help);

// The runtime an engine runs its containers under by default, as its config file names it:
// what gpu-run's entry chains (docs/ARCHITECTURE.md, "The runtime chain").
struct DefaultRuntime {
  std::string name;       // the engine's name for it: "nvidia", "runc"
  std::string binary;     // as the file gives it (absolute, or a name on PATH); empty: the engine's built-in runc;
                          // for is_entry, what gpu-run's entry runs
  std::string where;      // for messages: daemon.json's default-runtime "nvidia" (runtimes.nvidia.path)
  bool is_entry = false;  // the default is gpu-run's own entry: what it chains now stays
};

// A runtime an engine's config file names, with the binary it runs as the file gives it.
struct NamedRuntime {
  std::string name;    // daemon.json's runtimes.<name>, containerd's handler
  std::string binary;  // its path / options.BinaryName; "" when none (runc, or a shim of its own)
};

// What gpu-run's entry runs after gpu-run-runtime.
struct Chain {
  std::optional<fs::path> next;  // the runtime it execs; nullopt: the gpu-run config's "runtimes" (runc)
  std::string name;              // the engine's name for it
  std::string where;             // where it was found (DefaultRuntime::where)
};

// Resolves `d` for an entry of `source` (the engine's config file) that runs `runtime`
// (gpu-run-runtime): a binary given by name is looked up on PATH. For `d.is_entry`, the chain
// the entry's binary (`d.binary`) holds now (none when it runs gpu-run-runtime itself). Throws
// Error (exit 2), one line naming `source`, where the chain cannot be resolved: the binary is
// missing, or is gpu-run-runtime or a chain file itself (a loop).
Chain resolve_chain(const DefaultRuntime& d, const std::string& source, const fs::path& runtime);

// The chain file of the entry `entry` of the engine config `engine_config`:
// <its directory>/gpu-run-runtime.<entry>.
fs::path chain_file_path(const fs::path& engine_config, const std::string& entry);

// The chain a file an entry runs holds: its runtime when `binary` is a chain file, nullopt
// when it is not one (gpu-run-runtime itself) or cannot be read.
std::optional<fs::path> chain_of_binary(const fs::path& binary);

// "gpu-run-runtime -> nvidia-container-runtime (/usr/bin/nvidia-container-runtime, dockerd's
// default runtime "nvidia")", or "gpu-run-runtime -> the gpu-run config's runtimes (runc)".
std::string chain_words(const Chain& chain);

// What configure does with an entry's chain file, decided before anything is written.
struct ChainFile {
  fs::path path;       // chain_file_path(...)
  std::string text;    // the file's text, when the entry chains a runtime
  bool write = false;  // the file is missing or says something else
  bool stale = false;  // the entry stops running it; it stays for the containers started through it
};

// The chain file at `path` for `chain` and gpu-run-runtime `runtime` (its comment names
// `command`, "configure docker", and the entry, `entry_words`); `entry_changes`: configure
// rewrites the entry.
ChainFile plan_chain_file(const Chain& chain, const fs::path& path, const fs::path& runtime, const std::string& command,
                          const std::string& entry_words, bool entry_changes);

// --dry-run's lines on stderr: the chain, and what would become of the chain file.
void report_chain_dry_run(const Chain& chain, const ChainFile& file);

// Writes the chain file when planned (mode 0755, atomic), saying so: before the entry that runs it.
void write_chain_file(const ChainFile& file);

// After the entry is written: the chain, and a note for a chain file the entry stopped running.
void report_chain(const Chain& chain, const ChainFile& file);

}  // namespace gpurun
