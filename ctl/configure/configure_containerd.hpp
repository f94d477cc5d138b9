#pragma once

#include <optional>
#include <string>

#include "ctl_common.hpp"

namespace CLI {
class App;
}

namespace gpurun {

constexpr const char* kDefaultContainerdConfig = "/etc/containerd/config.toml";
constexpr const char* kDefaultRuntimeHandler = "gpu-run";
constexpr const char* kFallbackRuntimePath = "/usr/bin/gpu-run-runtime";

// `gpu-run-ctl configure containerd`: adds a CRI runtime handler running gpu-run-runtime to
// containerd's config.toml.
struct ConfigureContainerdOptions {
  std::string containerd_config = kDefaultContainerdConfig;  // containerd's config.toml
  bool dry_run = false;
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

// Adds or updates the runtime handler `handler` (runtime_type io.containerd.runc.v2,
// pod_annotations letting the contract's annotations through, options.BinaryName =
// `runtime_path`, the default runtime's SystemdCgroup) and, when the file has no table for
// the default runtime, runc's (containerd replaces its built-in runtimes with the file's).
// Keeps comments, the order of keys and every other setting. `existing` is the file's text
// (nullopt or blank: a new version 2 file). Pure. Throws Error (exit 2) naming `source`
// (with the line for a TOML syntax error) for malformed TOML, config version 1 or an unknown
// one, or a key of the wrong type on the way.
ContainerdEdit merge_containerd_config(const std::optional<std::string>& existing, const std::string& source,
                                       const std::string& runtime_path, const std::string& handler);

// Edits the file (backup <config>.gpu-run.bak, atomic replace) or prints it with --print.
void run_configure_containerd(const ConfigureContainerdOptions& options);

// Registers `containerd` on the `configure` command.
void add_configure_containerd_command(CLI::App& configure);

}  // namespace gpurun
