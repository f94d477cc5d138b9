#pragma once

#include <optional>
#include <string>

#include "ctl/configure/chain.hpp"
#include "ctl/configure/undo.hpp"
#include "ctl/ctl_common.hpp"

namespace CLI {
class App;
}

namespace gpurun {

constexpr const char* kDefaultContainerdConfig = "/etc/containerd/config.toml";
constexpr const char* kDefaultRuntimeHandler = "gpu-run";
constexpr const char* kFallbackRuntimePath = "/usr/bin/gpu-run-runtime";

// `gpu-run-ctl configure containerd`: adds a CRI runtime handler running gpu-run-runtime to
// containerd's config.toml, chaining what the default handler runs; with `undo`, takes it out.
struct ConfigureContainerdOptions {
  std::string containerd_config = kDefaultContainerdConfig;  // containerd's config.toml
  bool dry_run = false;
  bool undo = false;
  std::optional<std::string> config;        // the gpu-run config the runtime should read
  std::optional<std::string> runtime_path;  // default: next to this program, else /usr/bin
  std::string handler = kDefaultRuntimeHandler;
};

// The outcome of adding the handler to a config.toml.
struct ContainerdEdit {
  FileEdit file;
  int version = 2;    // the config's version (2: containerd 1.x, 3: containerd 2.x)
  std::string table;  // the handler's table, e.g. plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu-run
};

// The runtime containerd's CRI plugin runs pods under by default: default_runtime_name (else
// runc) and that handler's options.BinaryName (none: runc). Pure. Throws Error (exit 2) naming
// `source` for a malformed file, a default without its table (other than runc, containerd's
// built-in), or a default that is not a runc-shim handler (kata, gVisor: no binary to chain).
DefaultRuntime containerd_default_runtime(const std::optional<std::string>& existing, const std::string& source,
                                          const std::string& handler);

// The CRI runtime handlers config.toml names, in the file's order, each with its
// options.BinaryName. Pure. Throws Error (exit 2) naming `source` for a malformed file.
std::vector<NamedRuntime> containerd_runtimes(const std::optional<std::string>& existing, const std::string& source);

// Adds or updates the runtime handler `handler`: runtime_type io.containerd.runc.v2,
// pod_annotations letting the contract's annotations through, the default handler's other
// settings and options (all but its BinaryName: SystemdCgroup, privileged_without_host_devices,
// container_annotations, ...), options.BinaryName = `entry_binary` (gpu-run-runtime, or the
// chain file that runs it); and, when the file has no table for the default runtime, runc's
// (containerd replaces its built-in runtimes with the file's). Keeps comments, the order of keys
// and every other setting. `existing` is the file's text (nullopt or blank: a new version 2
// file). Pure. Throws Error (exit 2) naming `source` (with the line for a TOML syntax error) for
// malformed TOML, config version 1 or an unknown one, or a key of the wrong type on the way.
ContainerdEdit merge_containerd_config(const std::optional<std::string>& existing, const std::string& source,
                                       const std::string& entry_binary, const std::string& handler);

// What --undo does to config.toml `current` given the `backup` configure took before the
// handler: the backup's bytes when the file without what configure added (the handler, runc's
// table when it added one, the tables on the way, a new file's version line) reads as the
// backup does (comments and layout aside); no file when configure created it. Pure. Throws Error
// (exit 2), one line naming `source`, when the file changed in another way since (the key
// named), or has no backup to restore.
UndoEdit undo_containerd_config(const std::optional<std::string>& current, const std::optional<std::string>& backup,
                                const std::string& source, const std::string& handler);

// Edits the file (backup <config>.gpu-run.bak, atomic replace) and writes the chain file, or
// prints them with --print; --undo puts the file back.
void run_configure_containerd(const ConfigureContainerdOptions& options);

// Registers `containerd` on the `configure` command.
void add_configure_containerd_command(CLI::App& configure);

}  // namespace gpurun
