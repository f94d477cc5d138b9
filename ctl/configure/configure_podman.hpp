#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ctl/configure/configure_docker.hpp"
#include "ctl/configure/undo.hpp"

namespace CLI {
class App;
}

namespace gpurun {

constexpr const char* kDefaultHooksDir = "/usr/share/containers/oci/hooks.d";
constexpr const char* kHookFileName = "gpu-run.json";

// `gpu-run-ctl configure podman`: installs a hooks.d file so podman (and CRI-O) inject
// gpu-run-hook at createRuntime.
struct ConfigurePodmanOptions {
  std::string hooks_dir = kDefaultHooksDir;
  bool dry_run = false;
  bool undo = false;                      // remove the hooks.d file again
  bool always = false;                    // inject into every container, not only annotated ones
  std::optional<std::string> config;      // passed to the hook as --config
  std::optional<std::string> hook_path;   // default: gpu-run-hook next to this program
  bool guard = true;                      // enable and start the node guard (--no-guard: leave it)
  CommandRunner systemctl = run_command;  // how systemctl runs (tests: a fake)
  std::string systemd_dir = "/run/systemd/system";
};

// The hooks.d (schema 1.0.0) document: gpu-run-hook with --config at createRuntime, when
// one of gpu-run's annotations is set (or always). Pure.
nlohmann::ordered_json hooks_d_document(const std::string& hook_path, const std::string& config_path, bool always);

// Replaces an existing hooks.d file's content with `wanted` unless it already says the
// same (compared as JSON). Throws Error (exit 2) with file:line:column when the existing
// text is malformed: that file is never overwritten. Pure.
FileEdit hook_file_edit(const std::optional<std::string>& existing, const std::string& source,
                        const nlohmann::ordered_json& wanted);

// What --undo does to <hooks-dir>/gpu-run.json (`current`): the file is removed, or, when
// configure replaced another file of that name, that file (`backup`) is put back byte for byte.
// Pure. Throws Error (exit 2), one line naming `source`, when the file is not gpu-run's hook
// (malformed, or its hook is not gpu-run-hook).
UndoEdit undo_hook_file(const std::optional<std::string>& current, const std::optional<std::string>& backup,
                        const std::string& source);

// Writes <hooks-dir>/gpu-run.json atomically (backup gpu-run.json.gpu-run.bak, which podman
// ignores), or prints it with --dry-run; --undo removes it.
void run_configure_podman(const ConfigurePodmanOptions& options);

// Registers `podman` on the `configure` command.
void add_configure_podman_command(CLI::App& configure);

}  // namespace gpurun
