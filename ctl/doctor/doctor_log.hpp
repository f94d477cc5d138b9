#pragma once

// doctor's reading of a job that already crashed: a training log (or `docker logs` output)
// and an exit status, turned into findings about /dev/shm. Pure: text in, findings out.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor_rules.hpp"

namespace gpurun {

// One line of a log that says /dev/shm ran out, as PyTorch and NCCL print it across versions.
struct CrashEvidence {
  enum Kind {
    kWorkerKilledByBusError,  // "DataLoader worker (pid N) is killed by signal: Bus error"
    kBusErrorInWorker,        // "Unexpected bus error encountered in worker ... insufficient shared memory (shm)"
    kTorchShmNoSpace,         // "unable to write to file </torch_...>: No space left on device (28)"
    kTorchShmAllocate,        // "unable to allocate shared memory(shm) for file </torch_...>"
    kNcclSegment,             // "Error while creating shared memory segment /dev/shm/nccl-... (size N)"
    kSigbusExit,              // exit status 135 (128 + SIGBUS), "Bus error (core dumped)"
    kWorkersExited,           // "DataLoader worker (pid(s) ...) exited unexpectedly": a consequence
  };
  Kind kind;
  std::size_t line = 0;                // 1-based
  std::string text;                    // the line, trimmed and bounded
  std::optional<std::uint64_t> bytes;  // NCCL's segment size
};

struct CrashFacts {
  std::string source;                     // "log train.log", "container t1 (3f2a9c1b0e4d, docker)"
  std::size_t lines = 0;                  // lines read
  std::vector<CrashEvidence> evidence;    // in log order, at most one of a kind per distinct line text
  std::optional<int> exit_code;           // the container's, when known
  std::optional<std::uint64_t> shm_size;  // the container's /dev/shm when known
  std::optional<std::string> profile;     // GPU_RUN_PROFILE when known
  // What gpu-run recorded in the container's environment when it sized it (contract.hpp).
  std::optional<std::string> gpus;           // GPU_RUN_GPUS
  std::optional<std::string> workers;        // GPU_RUN_NUM_WORKERS
  std::optional<std::string> batch_size;     // GPU_RUN_BATCH_SIZE
  std::optional<std::uint64_t> planned_shm;  // GPU_RUN_SHM_SIZE: the size gpu-run applied
};

// Reads a log: every line that says /dev/shm ran out. Tolerates NUL bytes (PyTorch writes
// one after its bus-error message), carriage returns, timestamps and prefixes.
void read_crash_log(std::string_view text, CrashFacts& facts);

// What happened, why, and the command that fixes it; an OK finding when nothing was found.
std::vector<Finding> diagnose_crash(const CrashFacts& facts);

}  // namespace gpurun
