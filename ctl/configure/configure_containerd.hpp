#pragma once

#include <optional>
#include <string>
#include <vector>

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
  std::optional<std::string> chain;  // --chain HANDLER: chain it instead of the default handler
  std::string host_root = "/";       // where the host's / is: absolute imports are read below it
};

// The files containerd reads for one config.toml, in the order it merges them: config.toml, then
// what its `imports` name, breadth-first (a glob's matches sorted by name, a relative path from
// the importing file's directory, each path once), with gpu-run's own drop-in in its place.
struct ContainerdSource {
  std::string path;                 // as read (below the host root)
  std::optional<std::string> text;  // nullopt: gpu-run's drop-in, not written yet
  bool dropin = false;              // gpu-run's own drop-in
};
struct ContainerdSources {
  std::vector<ContainerdSource> files;  // files[0]: config.toml (nullopt text: missing)
};

// gpu-run's drop-in for `handler`: 99-zz-gpu-run.toml (99-zz-gpu-run-<handler>.toml for another
// handler), named to sort after NVIDIA's 99-nvidia.toml.
std::string containerd_dropin_name(const std::string& handler);

// Reads `config` and the files its imports name, as containerd does (absolute paths below
// `host_root`). When config.toml imports a directory by a glob that gpu-run's drop-in matches
// (its last such import), the drop-in is in the list, read when it exists. Throws Error (exit 2)
// naming the file for a malformed one or a missing explicit import (containerd refuses both).
ContainerdSources read_containerd_sources(const fs::path& config, const std::string& handler,
                                          const fs::path& host_root = "/");

// One file's sources: `existing` as config.toml at `source`, no imports followed. For tests and
// callers that hold the text.
ContainerdSources single_containerd_source(const std::optional<std::string>& existing, const std::string& source);

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

// The runtime gpu-run's handler chains, from what containerd makes of all `sources` without
// gpu-run's drop-in: containerd 1.x (config version 2) takes a plugin's whole section from the
// last file that has it; containerd 2.x (version 3) merges the files key by key. The default
// handler, or `chain` (--chain) when given. Pure. Throws Error (exit 2) as
// containerd_default_runtime does, and for a --chain handler the files do not have.
DefaultRuntime containerd_chained_runtime(const ContainerdSources& sources, const std::string& handler,
                                          const std::optional<std::string>& chain);

// The CRI runtime handlers containerd ends up with from all `sources` (gpu-run's drop-in
// included), each with its options.BinaryName. Pure.
std::vector<NamedRuntime> containerd_effective_runtimes(const ContainerdSources& sources);

// What configure does: with a drop-in in `sources`, writes it (config.toml stays byte for byte):
// on containerd 1.x the whole CRI section the files before it add up to plus gpu-run's handler,
// on 2.x the handler alone; else edits config.toml (merge_containerd_config), refusing when an
// import replaces its CRI section (containerd 1.x). `warnings`: gpu-run's handler would bypass a
// handler running NVIDIA's runtime; `notes`: why the chain is runc on a CDI node, what the
// drop-in was copied from. Pure. Throws Error (exit 2) naming the file.
struct ContainerdPlan {
  ContainerdEdit edit;  // edit.file: the file to write (config.toml or the drop-in)
  std::string path;     // the file edit.file is for
  bool dropin = false;  // the file is gpu-run's drop-in
  std::string stale;    // the drop-in's copied section differs from what the files before it say now
  std::vector<std::string> warnings;
};
ContainerdPlan plan_containerd(const ContainerdSources& sources, const std::string& entry_binary,
                               const std::string& handler, const std::optional<std::string>& chain);

// "" when gpu-run's drop-in in `sources` (if any) still carries the CRI section the files before
// it add up to (containerd 1.x); else which key differs: another tool rewrote the section since,
// and the drop-in, read last, overrides it. Pure. Never throws ("" for a file it cannot read).
std::string containerd_dropin_stale(const ContainerdSources& sources, const std::string& handler);

// The GPU handlers `runtimes` names that `chained` (the binary gpu-run's handler runs next, ""
// for runc) is not: "\"nvidia\" (/usr/bin/nvidia-container-runtime)", "" when none. Pure.
std::string bypassed_gpu_handlers(const std::vector<NamedRuntime>& runtimes, const std::string& chained);

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

// What --undo does to gpu-run's drop-in `path` (text `text`, nullopt: missing): removes it when
// gpu-run-ctl wrote it (its first line says so); the handler's BinaryName in entry_binary.
// Pure. Throws Error (exit 2) naming the path for a file of that name gpu-run-ctl did not write.
UndoEdit undo_containerd_dropin(const std::optional<std::string>& text, const std::string& path,
                                const std::string& handler);

// Edits the file (backup <config>.gpu-run.bak, atomic replace) and writes the chain file, or
// prints them with --print; --undo puts the file back.
void run_configure_containerd(const ConfigureContainerdOptions& options);

// Registers `containerd` on the `configure` command.
void add_configure_containerd_command(CLI::App& configure);

}  // namespace gpurun
