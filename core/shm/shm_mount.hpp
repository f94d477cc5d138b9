#pragma once

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/fd.hpp"

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

// How /dev/shm looks in a container.
enum class ShmMount {
  kMissing,   // no /dev/shm at all
  kNotMount,  // a plain directory of /dev (no mount of its own, as with --ipc=none)
  kNotTmpfs,  // its own mount, but not a tmpfs (a disk directory bound in)
  kTmpfs,
};

// "missing", "not-a-mount", "not-tmpfs", "tmpfs".
const char* shm_mount_name(ShmMount mount);

// What fstat, fstatfs and fstatvfs say about one open file.
struct FsStat {
  struct stat st {};
  struct statfs sfs {};
  struct statvfs svfs {};

  std::uint64_t size() const;  // f_blocks x f_frsize: a tmpfs's size in bytes
  std::uint64_t used() const;  // (f_blocks - f_bfree) x f_frsize
  bool is_tmpfs() const;       // statfs's f_type is TMPFS_MAGIC
};

// fstat, fstatfs and fstatvfs of `fd`. Throws Error naming `what`.
FsStat stat_fs(int fd, const std::string& what);

// How the directory `shm` sits on /dev, whose device is `dev_device` (nullopt when /dev could
// not be read): kNotMount on /dev's own device, else kTmpfs or kNotTmpfs. Never kMissing.
ShmMount classify_shm(const FsStat& shm, std::optional<dev_t> dev_device);

// A container's /dev/shm opened under `rootfd` (its /proc/PID/root from the host, "/" from
// inside it) as `resolve` says, and read with fstat*: the one probe of resize, doctor and the
// guard. `error` is 0 when it opened; ENOENT (none), ENOTDIR (not a directory) or, under
// kNoSymlinks, ELOOP (a symlink, not followed) otherwise; any other failure throws.
struct ShmProbe {
  int error = 0;
  UniqueFd dir;  // the open /dev/shm (error 0)
  FsStat fs;
  ShmMount mount = ShmMount::kMissing;
};
ShmProbe probe_shm_dir(int rootfd, Resolve resolve, const std::string& what);

// Whether the process `pid` ("self" or a number) is on the host's IPC namespace, so that its
// /dev/shm is the host's (--ipc=host, hostIPC): the namespace of this process (a door on the
// host) or the kernel's initial one (a door inside a container asking about itself). Throws
// Error naming `what` when /proc/<pid>/ns/ipc cannot be read.
bool in_host_ipc_namespace(const std::string& pid, const std::string& what);

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

// nullopt unless `r` resized or mounted /dev/shm and it came out smaller than `size`; then the
// error the doors fail (or warn) with.
std::optional<Error> short_of_size(const ShmResult& r, std::uint64_t size);

// Resizes an engine's own shm tmpfs where the engine mounted it on the host, at `source`: the
// bind source of a container's /dev/shm that is_engine_shm_source accepted (containerd's pod
// shm, Docker's mounts/shm, podman's userdata/shm), before the container starts, so no hook
// and no mount namespace are needed. The path is resolved from / without following any symlink,
// and only a tmpfs that is a mount of its own (not a directory of /run's tmpfs) and not the
// host's /dev/shm is touched, through the superblock (fspick + fsconfig; the bind into the
// container may be read-only). Grow-only unless `allow_shrink`. nullopt when it cannot be done
// from here (no such mount yet, not a mount root, not a tmpfs, a kernel without fspick): the
// hook then does it from inside the container. Throws Error when the resize itself fails.
std::optional<ShmResult> resize_engine_shm(const std::string& source, std::uint64_t size, bool allow_shrink,
                                           std::optional<dev_t> host_shm_dev);

}  // namespace gpurun
