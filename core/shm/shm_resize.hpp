#pragma once

// Resizing a running container's /dev/shm (gpu-run-ctl resize): which /dev/shm the engine
// gave the container, and whether the size asked for may replace the one it has. Pure; the
// act is the hook's (shm_mount.hpp) in a child process (docs/ARCHITECTURE.md, "The doors:
// plan, then act").

#include <cstdint>
#include <optional>
#include <string>

#include "decision/refusal.hpp"
#include "oci/container.hpp"

namespace gpurun {

// What the container's /dev/shm is now, measured from the host (resolved in its root
// without following symlinks).
struct ShmFacts {
  bool host_ipc = false;     // in the host's IPC namespace (podman's inspect says "shareable" even then)
  bool tmpfs_mount = false;  // a tmpfs mount of its own (not a directory of /dev, not a disk)
  bool host_shm = false;     // the same device as the host's /dev/shm (-v /dev/shm:/dev/shm)
  std::uint64_t size = 0;    // bytes
  std::uint64_t used = 0;
};

// What was asked.
struct ResizeAsk {
  std::uint64_t size = 0;
  bool force = false;                         // --force: past the memory budget
  std::optional<std::uint64_t> memory_limit;  // the smallest limit of the containers involved
  double memory_fraction_max = 0.5;
  std::string container;  // the container as its refusals name it (the owner's of a joined IPC namespace)
};

// The resize to do, or why not: a Refusal (decision/refusal.hpp: kNoShm ... kResizeOverBudget)
// with the numbers its words need, worded by the door (docs/ARCHITECTURE.md, "Errors and
// refusals").
struct ResizePlan {
  std::optional<Refusal> refusal;  // unset when it may go ahead
  std::uint64_t size = 0;
  bool allow_shrink = false;  // the size is below the current one (never below used)
  bool over_budget = false;   // allowed only by `force`
};

// Checks `ask` against the container's IPC mode (`ipc` after following container:X once:
// the owner's) and its /dev/shm. Refuses: no /dev/shm (none), the host's (host, the host's IPC
// namespace, or bound in), not a tmpfs mount, a size below 1 MiB or below what /dev/shm holds
// now, a size over the memory budget without `force`.
ResizePlan plan_resize(const IpcMode& ipc, const ShmFacts& shm, const ResizeAsk& ask);

}  // namespace gpurun
