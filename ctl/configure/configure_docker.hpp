#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ctl/configure/chain.hpp"
#include "ctl/configure/guard_service.hpp"
#include "ctl/configure/undo.hpp"
#include "ctl/ctl_common.hpp"

namespace CLI {
class App;
}

namespace gpurun {

constexpr const char* kDefaultDaemonJson = "/etc/docker/daemon.json";

// `gpu-run-ctl configure docker`: registers gpu-run-runtime in dockerd's daemon.json, chaining
// the runtime containers run under now; with `undo`, takes it back out.
struct ConfigureDockerOptions {
  bool set_default = false;
  bool dry_run = false;
  bool undo = false;
  std::string daemon_json = kDefaultDaemonJson;
  std::optional<std::string> config;        // the gpu-run config the runtime should read
  std::optional<std::string> runtime_path;  // default: gpu-run-runtime next to this program
  bool guard = true;                        // enable and start the node guard (--no-guard: leave it)
  CommandRunner systemctl = run_command;    // how systemctl runs (tests: a fake)
  std::string systemd_dir = "/run/systemd/system";
};

// The runtime dockerd runs containers under by default: "default-runtime" (else runc, its
// built-in) and that runtime's "path". Pure. Throws Error (exit 2) naming `source` for a
// malformed file, a default-runtime that no runtime entry has, and one that has no "path" (a
// shim given by "runtimeType") or has "runtimeArgs": those cannot be chained.
DefaultRuntime docker_default_runtime(const std::optional<std::string>& existing, const std::string& source);

// The runtimes daemon.json names ("runtimes"), in the file's order. Pure. Throws Error (exit 2)
// naming `source` for a malformed file.
std::vector<NamedRuntime> daemon_json_runtimes(const std::optional<std::string>& existing, const std::string& source);

// Sets runtimes."gpu-run".path to `entry_binary` (gpu-run-runtime, or the chain file that runs
// it) keeping its runtimeArgs and every other key, in order, and, with `set_default`,
// "default-runtime": "gpu-run". `existing` is the file's text (nullopt or blank: no file).
// Pure. Throws Error (exit 2) naming `source` with line:column when the existing text is
// malformed or has a runtimes entry of the wrong shape.
FileEdit merge_daemon_json(const std::optional<std::string>& existing, const std::string& source,
                           const std::string& entry_binary, bool set_default);

// What --undo does to daemon.json `current` given the `backup` configure took before gpu-run's
// entry: the backup's bytes when the file without gpu-run's entry (runtimes."gpu-run", and
// "default-runtime": "gpu-run" back to the backup's) is the backup's; no file when configure
// created it. Pure. Throws Error (exit 2), one line naming `source`, when the file changed in
// another way since (the change named), or has no backup to restore.
UndoEdit undo_daemon_json(const std::optional<std::string>& current, const std::optional<std::string>& backup,
                          const std::string& source);

// How to make the one dockerd that reads `daemon_json` reread it, for a person: signal the pid
// its pid file names (daemon.json's "pidfile", else dockerd's default /var/run/docker.pid for
// the default daemon.json), never every dockerd on the host (`pidof dockerd`). `text` is the
// file as configure leaves it (nullopt: none). Pure; a malformed text counts as no "pidfile".
std::string dockerd_reload_hint(const std::string& daemon_json, const std::optional<std::string>& text);

// Edits the file (backup <file>.gpu-run.bak, atomic replace) and writes the chain file, or
// prints them with --dry-run; --undo puts the file back. Then turns the node guard on
// (apply_guard_service; not with --no-guard), or off with --undo.
void run_configure_docker(const ConfigureDockerOptions& options);

// Registers `docker` on the `configure` command.
void add_configure_docker_command(CLI::App& configure);

}  // namespace gpurun
