#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "shm_mount.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl doctor`: checks a container's /dev/shm against what PyTorch DataLoader and NCCL
// need, inside the container (no argument) or from the host for a running container.
struct DoctorOptions {
  std::optional<std::string> container;  // name or id; none: this process's own container
  std::optional<std::string> engine;     // docker | podman; default: the config's engine
  bool json = false;
};

// Exit codes of doctor: the worst finding. 1 (doctor could not check) and 2 (a wrong request)
// keep their meaning from the rest of gpu-run-ctl.
constexpr int kDoctorExitWarn = 3;
constexpr int kDoctorExitFail = 4;

// A file in /dev/shm. `bytes` is what it occupies (allocated blocks), not its length.
struct ShmFile {
  std::string name;
  std::uint64_t bytes = 0;
};

// Everything doctor measured, before any judgement. Unknown facts stay empty.
struct DoctorFacts {
  std::string target;      // "container t1 (3f2a9c1b0e4d, docker)", "this container"
  bool from_host = false;  // a container seen from the host (inspect + /proc/PID)
  std::string engine;      // docker | podman when from_host
  ShmMount shm_mount = ShmMount::kTmpfs;
  std::uint64_t shm_size = 0;  // bytes, when shm_mount is not kMissing
  std::uint64_t shm_used = 0;
  std::optional<bool> shm_is_host;             // same device as the host's /dev/shm (from the host only)
  std::string ipc_mode;                        // inspect's IpcMode; inside: "host" or "" (own namespace)
  std::optional<std::uint64_t> memory_limit;   // the container's memory limit
  std::optional<unsigned> cpus;                // CPUs the container may use
  std::string cpus_source;                     // how `cpus` was found, for the message
  std::map<std::string, std::string> env;      // the container's GPU_RUN_* variables (contract_env_names())
  std::vector<ShmFile> files;                  // every entry of /dev/shm
  std::map<std::string, std::string> sysctls;  // kernel.shmmax / kernel.shmall when not the kernel default
  double memory_fraction_max = 0.5;            // from the host config
};

enum class Level { kOk, kWarn, kFail };

const char* level_name(Level level);

struct Finding {
  Level level = Level::kOk;
  std::string check;    // a stable id: shm-mount, shm-size, shm-use, ipc, memory, sizing, workers, ...
  std::string message;  // what was found, with the numbers
  std::string fix;      // what to do; empty when nothing
};

// The findings for `facts`, in a fixed order. Pure.
std::vector<Finding> diagnose(const DoctorFacts& facts);

// The worst level among `findings` (kOk when empty).
Level worst_level(const std::vector<Finding>& findings);

// 0 when the worst finding is OK, kDoctorExitWarn for WARN, kDoctorExitFail for FAIL.
int doctor_exit_code(const std::vector<Finding>& findings);

// The report for people: a header naming the target, one row per finding, the fix under it.
std::string format_findings(const DoctorFacts& facts, const std::vector<Finding>& findings);

// The same for programs: {"target", "worst", "exit_code", "facts", "findings": [...]}.
nlohmann::json doctor_json(const DoctorFacts& facts, const std::vector<Finding>& findings);

// Classifies /dev/shm names: PyTorch's `torch_*` segments and NCCL's `nccl-*` ones.
bool is_torch_segment(const std::string& name);
bool is_nccl_segment(const std::string& name);

// Measures the facts: from the host through `<engine> inspect` (once) and /proc/PID/root
// when options.container is set, else for the container this process runs in. Throws Error
// (exit 2) for an unknown or stopped container.
DoctorFacts gather_facts(const DoctorOptions& options);

// Prints the report (text or --json) and returns doctor's exit code.
int run_doctor(const DoctorOptions& options);

// Registers `doctor` on `app`.
void add_doctor_command(CLI::App& app);

}  // namespace gpurun
