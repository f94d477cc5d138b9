#pragma once

// doctor's reading of a job that already crashed: a training log (or `docker logs` output)
// and an exit status, turned into findings about /dev/shm. Pure: text in, findings out.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/doctor/crash_matchers.hpp"
#include "ctl/doctor/doctor_rules.hpp"

namespace gpurun {

// A line of a log that says why the job died (crash_matchers.hpp), where it is in the log.
struct CrashEvidence : CrashLine {
  std::size_t line = 0;  // 1-based
  std::string text;      // the line, trimmed and bounded (with the next one for a re-wrapped message)
};

// Where the job ran, which decides how a fix is said: gpu-run's flags for a docker or podman
// container, the pod's annotations, the webhook and `gpu-run-ctl k8s` for a Kubernetes pod.
enum class CrashDoor { kEngine, kKubernetes };

struct CrashFacts {
  std::string source;                     // "log train.log", "container t1 (3f2a9c1b0e4d, docker)"
  std::size_t lines = 0;                  // lines read
  std::vector<CrashEvidence> evidence;    // in log order, at most one of a kind per distinct line text
  std::vector<std::string> engines;       // the engines the log names: "vLLM", "Ray", "Triton", "DeepSpeed", ...
  std::optional<int> exit_code;           // the container's, when known
  std::optional<std::uint64_t> shm_size;  // the container's /dev/shm when known
  std::optional<std::string> profile;     // GPU_RUN_PROFILE when known
  // What gpu-run recorded in the container's environment when it sized it (contract.hpp).
  std::optional<std::string> gpus;           // GPU_RUN_GPUS
  std::optional<std::string> workers;        // GPU_RUN_NUM_WORKERS
  std::optional<std::string> batch_size;     // GPU_RUN_BATCH_SIZE
  std::optional<std::uint64_t> planned_shm;  // GPU_RUN_SHM_SIZE: the size gpu-run applied
  CrashDoor door = CrashDoor::kEngine;       // doctor --for k8s, or the log's own signs
  std::optional<std::string> pod;            // the pod `kubectl logs --prefix` names, when it does
  std::optional<bool> oom_killed;            // the engine's State.OOMKilled, when a container's
  std::optional<std::string> command_flag;   // the workers its command line gives ("-j 4"), when known
  std::uint64_t command_workers = 0;         // and their count
  std::string door_name;                     // the door that sized it (its record's), for the fix's words
};

// Reads a log: every line that says why the job died (/dev/shm running out, and the failures
// that look like it). Tolerates NUL bytes (PyTorch writes one after its bus-error message),
// carriage returns, timestamps and rank prefixes, and a message re-wrapped over two lines. A
// line that starts with `kubectl logs --prefix`'s "[pod/NAME/CONTAINER] " makes the door
// Kubernetes and names the pod.
void read_crash_log(std::string_view text, CrashFacts& facts);

// What happened, why, and the command that fixes it, one finding per family, in the engine's
// own terms; an OK finding when nothing was found. A failure that is not /dev/shm's never gets
// a /dev/shm fix.
std::vector<Finding> diagnose_crash(const CrashFacts& facts);

}  // namespace gpurun
