#pragma once

// The act step of resizing a running container's /dev/shm (the hook's, docs/ARCHITECTURE.md,
// "Hardening"), shared by gpu-run-ctl resize and gpu-run --guard.

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "shm_mount.hpp"

namespace gpurun {

// Remounts the /dev/shm of the container whose init is `pid` at `size` in a forked child:
// setns is irreversible for a process, so the child opens the container's mount namespace,
// gives up every capability but the four the remount needs, installs the seccomp filter,
// joins the namespace and applies the size (below the current one only with
// `allow_shrink`); the result comes back over a pipe. Throws Error as the child threw it.
ShmResult remount_shm_in_child(int pid, std::uint64_t size, bool allow_shrink, std::optional<dev_t> host_dev);

}  // namespace gpurun
