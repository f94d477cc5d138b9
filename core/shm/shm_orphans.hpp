#pragma once

// Segments left in a /dev/shm by processes that are gone: the engines' files (NCCL's, PyTorch's,
// Python's shared_memory as vLLM and SGLang use it, DeepSpeed's, Triton's, vLLM's own) that no
// process has open or mapped. The listing and the judgement are for `gpu-run-ctl reap` and for
// the node guard's orphaned-bytes metric; reap_orphans removes them, safely against a process
// that opens one meanwhile (docs/ARCHITECTURE.md, "Reaping orphaned segments").

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpurun {

// Whose a /dev/shm file is, from its name (each engine's naming, from its source).
enum class SegmentFamily {
  kNccl,          // nccl-XXXXXX (NCCL >= 2.12, misc/shmutils.cc), nccl-shm-recv-... (before)
  kTorch,         // torch_<pid>_<random>[_<n>] (PyTorch's shared tensors, StorageSharing.cpp)
  kPythonShm,     // psm_<hex> (CPython's multiprocessing.shared_memory: vLLM's MessageQueue, SGLang)
  kPythonSem,     // sem.mp-<random> (CPython's multiprocessing semaphores, through glibc's sem_open)
  kVllm,          // vllm_offload_*.mmap, VLLM_* buffers (vLLM's CPU offload tier and its own buffers)
  kDeepSpeed,     // deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank> (csrc/cpu/comm/shm.cpp)
  kTritonPython,  // triton_python_backend_shm_region_<n> (Triton's python backend)
  kOther,         // not an engine's: never reaped
};

// "nccl", "torch", "python-shm", "python-sem", "vllm", "deepspeed", "triton-python", "other".
const char* segment_family_name(SegmentFamily family);

// The family of the file named `name` in /dev/shm (reap's own quarantine prefix stripped).
SegmentFamily segment_family(std::string_view name);

// The prefix reap renames a segment to while it checks that no process took it meanwhile.
constexpr std::string_view kReapQuarantinePrefix = ".gpu-run-reap.";

// One regular file of a /dev/shm.
struct ShmSegment {
  std::string name;
  std::uint64_t bytes = 0;  // what it occupies (allocated blocks)
  ino_t inode = 0;
  SegmentFamily family = SegmentFamily::kOther;
  std::time_t changed = 0;  // the latest of its mtime and ctime
};

// The regular files of the directory `dirfd` (at most 100000). Throws Error naming `what`.
std::vector<ShmSegment> list_segments(int dirfd, const std::string& what);

// The inodes on device `dev` that some process has open (/proc/PID/fd) or mapped
// (/proc/PID/maps), over every process of the procfs `proc_fd`. A process whose fd or maps
// cannot be read is `unreadable` unless its mount namespace has no mount of `dev` (then it
// cannot open a segment there by its name).
struct Holders {
  std::set<ino_t> inodes;
  std::size_t processes = 0;      // processes read
  std::vector<pid_t> unreadable;  // processes whose fd or maps could not be read (not: exited)
};
Holders scan_holders(int proc_fd, dev_t dev);

// Pure: the segments as reap sees them. An orphan is an engine's segment no process holds that
// has not changed for `min_age` seconds before `now`.
struct OrphanReport {
  std::vector<ShmSegment> orphans;
  std::vector<ShmSegment> held;    // an engine's, open or mapped by a live process
  std::vector<ShmSegment> recent;  // an engine's, held by none, changed within min_age
  std::vector<ShmSegment> others;  // not an engine's: left alone
  std::uint64_t orphan_bytes() const;
};
OrphanReport classify_segments(const std::vector<ShmSegment>& segments, const std::set<ino_t>& held, std::time_t now,
                               std::time_t min_age);

// list_segments + scan_holders + classify_segments for the /dev/shm `shm_dirfd` on device `dev`:
// what the node guard can call for a container's orphaned bytes. `unreadable` as Holders'.
OrphanReport find_orphans(int shm_dirfd, dev_t dev, int proc_fd, std::time_t min_age,
                          std::vector<pid_t>* unreadable = nullptr);

// Removes `orphans` from `shm_dirfd` (device `dev`): renames each to a quarantine name, so that no
// process can open it by its name any more, scans the processes again, gives back its name to any
// one a process took meanwhile, and unlinks the rest. A segment whose inode changed since it was
// listed is left alone.
struct ReapResult {
  std::vector<ShmSegment> removed;
  std::vector<ShmSegment> kept;     // taken by a process, or replaced, between the listing and the removal
  std::vector<std::string> failed;  // "name: error", left as they were
};
ReapResult reap_orphans(int shm_dirfd, dev_t dev, int proc_fd, const std::vector<ShmSegment>& orphans);

}  // namespace gpurun
