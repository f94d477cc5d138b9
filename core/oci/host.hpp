#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.hpp"
#include "base/or_why.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// What this process (and so a container started from it) may use.
struct HostInfo {
  unsigned cpus = 1;  // min(affinity, cgroup quota), at least 1
  unsigned affinity_cpus = 1;
  std::optional<double> cgroup_cpu_quota;  // CPUs allowed by cpu.max / cfs quota
  std::optional<std::uint64_t> cgroup_memory_limit;
  std::uint64_t mem_total = 0;
  std::uint64_t mem_available = 0;
  std::vector<std::string> unread;  // the files that are there but could not be read, and why
};

// Probes the running process: sched_getaffinity, its cgroup (v1 or v2) under
// `root`/sys/fs/cgroup, and `root`/proc/meminfo. Missing files are not errors; files that are
// there but cannot be read leave their figure unknown and are named in `unread`.
HostInfo probe_host(const fs::path& root = "/");

// The lock the running node guard holds (gpu-run-ctl guard: a POSIX record lock, dropped by the
// kernel when the guard exits, however): one guard a host. 0600: a read lock that any user who
// could open it might take would keep every guard from starting.
inline constexpr const char* kNodeGuardLockPath = "/run/gpu-run/guard.lock";

// The sign every user's door reads: the running guard keeps this file (0644, made anew by each
// guard) write-locked. Only a writer of the file, root, can hold a write lock on it, so no user
// can make the doors believe a guard runs.
inline constexpr const char* kNodeGuardAlivePath = "/run/gpu-run/guard.alive";

// Whether a node guard runs on this host: another process holds a write lock on `alive` (F_GETLK
// for a read lock, so a reader's read lock does not count). False when it is missing (no guard
// yet), not a regular file, or cannot be opened.
bool node_guard_runs(const fs::path& alive = kNodeGuardAlivePath);

// The guard's side of node_guard_runs: a new file (0644) write-locked, then renamed to `alive`,
// so a read lock some user holds on an old one is left on a file nobody reads. The lock lasts as
// long as the returned descriptor. Throws Error naming the path when it cannot.
UniqueFd publish_node_guard_alive(const fs::path& alive = kNodeGuardAlivePath);

// Reads a small /proc or /sys file (at most 64KiB) with read(2), no streams: the hook reads
// these on every container start. Trailing newlines and spaces are removed. Else why not (the
// file missing, unreadable or larger), naming the file and the errno's words.
OrWhy<std::string> read_kernel_file(const fs::path& path);

// Pure parsers, exposed for tests.
// cgroup v2 "cpu.max": "max 100000" -> nullopt, "200000 100000" -> 2.0.
std::optional<double> parse_cpu_max(const std::string& text);
// cgroup v1 quota/period (quota -1 means none).
std::optional<double> parse_cfs_quota(const std::string& quota, const std::string& period);
// "memory.max" (v2, "max") or "memory.limit_in_bytes" (v1, huge = none).
std::optional<std::uint64_t> parse_memory_limit(const std::string& text);
// Returns {MemTotal, MemAvailable} in bytes from /proc/meminfo text.
std::pair<std::uint64_t, std::uint64_t> parse_meminfo(const std::string& text);
// The cgroup path of the process for `controller` ("" = v2 unified) from /proc/self/cgroup.
std::optional<std::string> parse_proc_cgroup(const std::string& text, const std::string& controller);
// The number of CPUs in a cpuset list such as "0-3,8,10-11".
std::optional<unsigned> parse_cpu_list(const std::string& text);

// The pod's cgroup, relative to the cgroup mount, from a container's OCI `linux.cgroupsPath`:
// the parent of the container's cgroup. systemd driver "kubepods-burstable-pod<uid>.slice:
// cri-containerd:<id>" -> "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice";
// cgroupfs driver "/kubepods/burstable/pod<uid>/<id>" -> "kubepods/burstable/pod<uid>". nullopt
// for anything else (relative paths, `..`, `.`, empty or odd slice names, a parent at the root).
std::optional<std::string> parent_cgroup_dir(const std::string& cgroups_path);

// The memory limit of the parent cgroup of `cgroups_path` (parent_cgroup_dir) under `root`
// (/sys/fs/cgroup): memory.max (v2) or memory/.../memory.limit_in_bytes (v1). Walks the path
// one directory at a time without following symlinks and reads at most 64 bytes. nullopt when
// there is no limit ("max") or the path or file is invalid, missing or unreadable.
std::optional<std::uint64_t> probe_parent_memory_limit(const std::string& cgroups_path,
                                                       const fs::path& root = "/sys/fs/cgroup");

// CPUs the job may use: affinity bounded by quota (rounded up), at least 1.
unsigned usable_cpus(unsigned affinity, std::optional<double> quota);

}  // namespace gpurun
