#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ctl/doctor/doctor_facts.hpp"
#include "ctl/doctor/doctor_log.hpp"
#include "oci/container.hpp"

namespace gpurun {

// Gathers DoctorFacts, inside a container or from the host for one, over core's probes
// (open_dir_in_root, stat_fs and classify_shm, probe_host, read_kernel_file).

// The facts of the container this process runs in (or of the host, when it runs in none).
void gather_inside(DoctorFacts& facts);

// The runtime entries of dockerd's `daemon_json` and containerd's `containerd_config` (each
// skipped when missing or unreadable as its format), resolved on this machine: what gpu-run's
// entries exec, and which others are NVIDIA's. `runtimes`: the gpu-run config's.
void gather_runtime_entries(DoctorFacts& facts, const std::string& daemon_json, const std::string& containerd_config,
                            const std::vector<std::string>& runtimes);

// A container as `<engine> inspect` shows it (run once per doctor run).
struct InspectedContainer {
  std::string engine;
  std::string name;  // as the user gave it
  ContainerInfo info;
  nlohmann::json host_config;  // HostConfig, an object (empty when absent)
  std::string target;          // "container t1 (3f2a9c1b0e4d, docker)"
};

// Runs `<engine> inspect` for `name`. Throws Error (exit 2) naming it when the engine does not
// know it.
InspectedContainer inspect_for_doctor(const std::string& engine, const std::string& name);

// True for a container that ran and exited (its logs and exit status are there to read).
bool has_exited(const InspectedContainer& container);

// The facts of a running container, seen from the host: its /dev/shm through /proc/PID/root
// (root needed). Throws Error (exit 2) for a container that is not running.
void gather_from_host(const InspectedContainer& container, DoctorFacts& facts);

// An exited container's crash facts: its exit status, its /dev/shm size and profile from the
// inspect, and the last 500 lines of `<engine> logs` read for /dev/shm failures.
CrashFacts gather_crash(const InspectedContainer& container);

// Fills the /dev/shm facts (shm_mount, shm_size, shm_used, files) of the tree whose root is
// `rootfd`, resolving symlinks inside that tree; `where` names the root in errors ("" or
// "/proc/PID/root"). Returns /dev/shm's device, nullopt when there is none.
std::optional<dev_t> measure_shm(int rootfd, const std::string& where, DoctorFacts& facts);

// The entries of the directory `dirfd` (not recursive, at most 100000), sorted by name, each
// with the space it occupies (0 for all but regular files). Throws Error naming `what`.
std::vector<ShmFile> list_shm_files(int dirfd, const std::string& what);

// The CPU quota in an inspect's HostConfig: --cpus (NanoCpus) or --cpu-quota/--cpu-period.
std::optional<double> inspect_cpu_quota(const nlohmann::json& host_config);

// The number of CPUs in the "Cpus_allowed_list:" line of /proc/PID/status text.
std::optional<unsigned> status_cpus_allowed(const std::string& status);

}  // namespace gpurun
