#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

enum class ShmOutcome {
  kResized,    // remounted the existing tmpfs with the new size
  kMounted,    // there was none: mounted a new tmpfs
  kUnchanged,  // already at least the size (grow-only)
  kHostShm,    // it is the host's /dev/shm: left alone
};

const char* outcome_name(ShmOutcome outcome);

struct ShmResult {
  ShmOutcome outcome = ShmOutcome::kUnchanged;
  std::uint64_t before = 0;  // bytes, 0 when there was no tmpfs
  std::uint64_t after = 0;
};

// What the executor needs to know; filled by the caller from the spec and host.
struct ShmTarget {
  int pid = 0;      // join /proc/<pid>/ns/mnt first when > 0
  fs::path rootfs;  // absolute, as seen in that mount namespace
  std::uint64_t size = 0;
  bool allow_shrink = false;
  std::optional<dev_t> host_shm_dev;  // st_dev of the host's /dev/shm, measured before setns
};

// The device of the host's /dev/shm, if it exists.
std::optional<dev_t> host_shm_device();

// Opens the container's mount namespace, before any sandboxing that forbids it.
// Returns an fd for join_mount_namespace.
int open_mount_namespace(int pid);

// setns() into the namespace opened above. Irreversible for this (single-threaded) process.
void join_mount_namespace(int ns_fd, int pid);

// Resizes or creates <rootfs>/dev/shm in the current mount namespace. Resolves the path
// without following any symlink (the image controls it) and only touches a tmpfs mount
// point (or creates one on a plain directory of a tmpfs /dev). Throws Error naming the path.
ShmResult apply_shm(const ShmTarget& target);

}  // namespace gpurun
