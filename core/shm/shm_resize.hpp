#pragma once

// Resizing a running container's /dev/shm (gpu-run-ctl resize): which /dev/shm the engine
// gave the container, and whether the size asked for may replace the one it has. Pure; the
// act is the hook's (shm_mount.hpp) in a child process (docs/ARCHITECTURE.md, "The doors:
// plan, then act").

#include <cstdint>
#include <optional>
#include <string>

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
};

// Why a resize may not go ahead: a value; the door words it with the plan's numbers
// (docs/ARCHITECTURE.md, "Errors and refusals").
enum class ResizeRefusal {
  kNoShm,         // IPC mode none: no /dev/shm at all
  kHostIpc,       // IPC mode host, or the host's IPC namespace
  kHostShmBound,  // the host's /dev/shm bound in
  kJoinedTwice,   // container:X where X joined another (ipc.owner is X)
  kUnknownIpc,    // an IPC mode gpu-run does not know
  kNotTmpfs,      // /dev/shm is not a tmpfs mount of its own
  kBelowMiB,      // the size asked for is below 1 MiB
  kBelowUsed,     // below what /dev/shm holds now (shm.used)
  kOverBudget,    // over the memory budget of ask.memory_limit, and not forced
};

// The resize to do, or why not, with what the refusal's words need.
struct ResizePlan {
  std::optional<ResizeRefusal> refusal;  // unset when it may go ahead
  std::uint64_t size = 0;
  bool allow_shrink = false;  // the size is below the current one (never below used)
  bool over_budget = false;   // allowed only by `force`
  IpcMode ipc;                // as given
  ShmFacts shm;               // as given
  std::optional<std::uint64_t> memory_limit;
  double memory_fraction_max = 0.5;
};

// Checks `ask` against the container's IPC mode (`ipc` after following container:X once:
// the owner's) and its /dev/shm. Refuses: no /dev/shm (none), the host's (host, the host's IPC
// namespace, or bound in), not a tmpfs mount, a size below 1 MiB or below what /dev/shm holds
// now, a size over the memory budget without `force`.
ResizePlan plan_resize(const IpcMode& ipc, const ShmFacts& shm, const ResizeAsk& ask);

}  // namespace gpurun
