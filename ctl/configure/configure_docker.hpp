#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ctl_common.hpp"

namespace CLI {
class App;
}

namespace gpurun {

constexpr const char* kDefaultDaemonJson = "/etc/docker/daemon.json";

// `gpu-run-ctl configure docker`: registers gpu-run-runtime in dockerd's daemon.json.
struct ConfigureDockerOptions {
  bool set_default = false;
  bool dry_run = false;
  std::string daemon_json = kDefaultDaemonJson;
  std::optional<std::string> config;        // the gpu-run config the runtime should read
  std::optional<std::string> runtime_path;  // default: gpu-run-runtime next to this program
};

// Sets runtimes."gpu-run".path (keeping its runtimeArgs and every other key, in order) and,
// with `set_default`, "default-runtime": "gpu-run". `existing` is the file's text (nullopt or
// blank: no file). Pure. Throws Error (exit 2) naming `source` with line:column when the
// existing text is malformed or has a runtimes entry of the wrong shape.
FileEdit merge_daemon_json(const std::optional<std::string>& existing, const std::string& source,
                           const std::string& runtime_path, bool set_default);

// Edits the file (backup <file>.gpu-run.bak, atomic replace) or prints it with --dry-run.
void run_configure_docker(const ConfigureDockerOptions& options);

// Registers `docker` on the `configure` command.
void add_configure_docker_command(CLI::App& configure);

}  // namespace gpurun
