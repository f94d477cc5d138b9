#pragma once

// The lines a crashed job's log says what killed it with: one small matcher per family
// (PyTorch's DataLoader and shared tensors, NCCL, vLLM, Ray, Triton's python backend, exit
// statuses, and the look-alikes that are not /dev/shm), each returning the family and the
// numbers in the line. Pure: text in, a match out. doctor_log.hpp reads logs with them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpurun {

// What one line (or a line and the next, for a message re-wrapped) reports.
struct CrashLine {
  enum Kind {
    kWorkerKilledByBusError,  // "DataLoader worker (pid N) is killed by signal: Bus error"
    kBusErrorInWorker,        // "Unexpected bus error encountered in worker ... insufficient shared memory (shm)"
    kTorchShmNoSpace,         // "unable to write to file </torch_...>", with or without ": No space left on device"
    kTorchShmAllocate,        // "unable to allocate shared memory(shm) for file </torch_...>" (PyTorch 2.x)
    kNcclSegment,             // "Error while creating shared memory segment ... (size N)", posix_fallocate's ENOSPC
    kSigbusExit,              // exit status 135, exitcode -7, "Signal 7 (SIGBUS)", stack dumpers' SIGBUS lines
    kWorkersExited,           // "DataLoader worker (pid(s) ...) exited unexpectedly": a consequence
    kVllmShmInsufficient,     // "Insufficient space in /dev/shm: 160 MiB required, 64 MiB free"
    kVllmMqStalled,           // "No available shared memory broadcast block found in 60 seconds"
    kRayStoreOnTmp,           // "The object store is using /tmp instead of /dev/shm because /dev/shm has only N bytes"
    kRayStoreTooBig,          // "System memory request exceeds memory available in /dev/shm", "exceeds /dev/shm size"
    kRayStoreShrunk,          // "Reducing object store memory because /dev/shm has only N bytes available" (Ray <= 0.5)
    kTritonShm,          // "Unable to initialize shared memory key ...", "Failed to increase the shared memory pool"
    kNcclShmAttach,      // "Error while attaching to shared memory segment ...: No such file or directory"
    kFdLimit,            // "received 0 items of ancdata", "Too many open files", Errno 24
    kOomKilled,          // "killed by signal: Killed", exitcode -9, exit code 137, SIGKILL
    kSegfault,           // "killed by signal: Segmentation fault", exitcode -11, SIGSEGV
    kCudaError,          // "CUDA error: ...", "CUDA out of memory"
    kNcclTimeout,        // "Watchdog caught collective operation timeout"
    kNcclNetwork,        // NCCL's sockets or InfiniBand failing: "Connection reset by peer", "NET/IB : Got completion"
    kDiskFull,           // "No space left on device" anywhere but /dev/shm: a checkpoint, a cache
    kTorchMmapNoMemory,  // "unable to mmap N bytes from file </torch_...>: Cannot allocate memory"
    kShmWriteNoSpace,    // "[Errno 28] No space left on device: '/dev/shm/...'": any program writing there
    kNcclSystemError,    // "unhandled system error": ncclSystemError with no WARN line saying which call failed
  };
  Kind kind = kSigbusExit;
  std::optional<std::uint64_t> bytes;      // what was asked: a segment, a region, the object store
  std::optional<std::uint64_t> available;  // what /dev/shm had, when the line says
  std::string detail;                      // the error after the numbers, a size hint, "nccl" for NCCL frames
};

// The family `text` reports, and its numbers; nullopt for a line that reports none.
std::optional<CrashLine> match_crash_line(std::string_view text);

// "worker-killed-by-bus-error", "vllm-shm-insufficient", ... (stable, for JSON).
const char* crash_kind_name(CrashLine::Kind kind);

// The engines a line names ("vLLM", "Ray", "Triton", "DeepSpeed", "torchrun", "SGLang"), appended
// to `engines` once each.
void note_engines(std::string_view text, std::vector<std::string>& engines);

}  // namespace gpurun
