#pragma once

// Where `gpu-run-ctl guard --engine docker` and `--engine podman` find their containers'
// directories for TaskWatcher: from what the engine tells (its processes' flags and config files,
// `podman info`), never a guessed path. nullopt with `why` when they cannot be found; the guard
// then polls the engine's CLI.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/or_why.hpp"
#include "guard/task_watch.hpp"
#include "oci/container.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// Docker: dockerd runs its containers as containerd tasks in its namespace (--containerd-namespace,
// default moby). dockerd is the process serving `docker_host` (DOCKER_HOST, unix:// only; empty:
// /var/run/docker.sock). Its --containerd (or daemon.json's "containerd", --config-file) names the
// containerd it uses; without one, the containerd it started under --exec-root
// (<exec-root>/containerd/containerd.sock) or the system one (/run/containerd/containerd.sock),
// whichever a containerd process serves. That containerd's --state, or `state` in its --config
// (default /etc/containerd/config.toml, then /run/containerd), holds the tasks. `proc`: /proc.
OrWhy<TaskLayout> docker_layout(const std::string& docker_host, const fs::path& proc = "/proc");

// Podman (rootful; conmon, then runc or crun): `podman info`'s store run root and storage driver.
// Each container has <runroot>/<driver>-containers/<id>/userdata/pidfile once the runtime has
// created it, and is gone when that process exits (podman keeps the directory until it is removed).
OrWhy<TaskLayout> podman_layout();
TaskLayout podman_layout_at(const fs::path& run_root, const std::string& driver);

// The annotations of a running Docker or podman container's OCI spec (gpu-run-runtime's decision
// record, guard_annotations' keys), read from its task's bundle where docker_layout (for
// DOCKER_HOST) or podman_layout finds it: what the guard reads, for doctor. None when the bundle
// cannot be found or read.
std::map<std::string, std::string> engine_spec_annotations(const ContainerInfo& c);

// The value of flag `name` in a Go program's argv ("--name value", "--name=value", one dash or
// two; the last one given wins), nullopt when absent.
std::optional<std::string> flag_value(const std::vector<std::string>& argv, const std::string& name);

// The inodes of the listening unix sockets bound at `path`, from the text of /proc/net/unix.
std::vector<unsigned long> unix_listeners(const std::string& proc_net_unix, const std::string& path);

// The pid of a process named `comm` that holds a listening unix socket bound at `path` (or at
// its canonical path), nullopt when none does.
std::optional<int> socket_server(const fs::path& proc, const fs::path& path, const std::string& comm);

}  // namespace gpurun
