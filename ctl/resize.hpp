#pragma once

#include <functional>
#include <optional>
#include <string>

#include "engine/sizing_flags.hpp"
#include "oci/container.hpp"
#include "shm/shm_resize.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl resize CONTAINER [SIZE]`: the running container's /dev/shm, remounted in place.
struct ResizeOptions {
  std::string container;
  std::optional<std::string> size;  // else the plan of the sizing flags
  SizingFlags sizing;
  std::optional<std::string> engine;  // default: the config's engine
  bool force = false;                 // past the memory budget
};

// The container whose /dev/shm `info` uses: itself, or X of --ipc=container:X (inspected
// with `inspect`). Throws Error (exit 2) when X is not running.
ContainerInfo shm_owner(const ContainerInfo& info, const std::function<ContainerInfo(const std::string&)>& inspect);

// What the command prints after a resize, one line each: the sizes, who shares them, and
// that `inspect` keeps the old ShmSize. `owner` is `info` unless it joined another's IPC.
std::string resize_report(const ContainerInfo& info, const ContainerInfo& owner, const ShmFacts& before,
                          std::uint64_t after, bool over_budget);

// Inspects the container, plans (shm_resize.hpp), and remounts its /dev/shm in a child that
// drops its capabilities and joins the container's mount namespace, holding the container's
// lock (shm_lock_path, file_lock.hpp) from the look at /dev/shm to the log line. Throws Error: exit 2
// for a refusal (with the numbers), 1 when the system fails.
void run_resize(const ResizeOptions& options);

// Registers `resize` on `app`.
void add_resize_command(CLI::App& app);

}  // namespace gpurun
