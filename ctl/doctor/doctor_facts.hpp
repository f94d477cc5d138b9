#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "decision/decision_record.hpp"
#include "oci/container.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {

// A file in /dev/shm. `bytes` is what it occupies (allocated blocks), not its length.
struct ShmFile {
  std::string name;
  std::uint64_t bytes = 0;
};

// A runtime entry of an engine's config file on this machine, as doctor on the host found it:
// gpu-run's (and what it execs) or another (and whether it is NVIDIA's).
struct RuntimeEntryFacts {
  std::string file;       // the daemon.json or config.toml it is in
  std::string engine;     // docker | containerd (gpu-run-ctl configure <engine>)
  std::string name;       // runtimes.<name>, the CRI handler
  bool gpu_run = false;   // runs gpu-run-runtime, directly or through a chain file
  std::string execs;      // gpu_run: what gpu-run-runtime execs, canonical; "" when not found
  std::string execs_how;  // gpu_run: where that comes from ("the chain file X", "the gpu-run config's runtimes")
  std::string binary;     // another entry: its binary, canonical ("" when not found or none)
  bool gpu = false;       // another entry: NVIDIA's runtime (nvidia-container-runtime*)
};

// Everything doctor measured, before any judgement: what the probes (doctor_probe.hpp) fill
// and the rules (doctor_rules.hpp) judge. Unknown facts stay empty.
struct DoctorFacts {
  std::string target;      // "container t1 (3f2a9c1b0e4d, docker)", "this container"
  bool from_host = false;  // a container seen from the host (inspect + /proc/PID)
  bool on_host = false;    // doctor ran on the host itself, in no container (its PID and IPC namespaces)
  std::string engine;      // docker | podman when from_host
  std::string runtime;     // from the host: the OCI runtime the engine ran it with (HostConfig.Runtime)
  ShmMount shm_mount = ShmMount::kTmpfs;
  std::uint64_t shm_size = 0;  // bytes, when shm_mount is not kMissing
  std::uint64_t shm_used = 0;
  std::optional<bool> shm_is_host;                 // same device as the host's /dev/shm (from the host only)
  std::optional<IpcMode> ipc;                      // the engine's (host: by the namespace); inside: host or unknown
  std::optional<std::uint64_t> memory_limit;       // the container's memory limit
  std::optional<unsigned> cpus;                    // CPUs the container may use
  std::string cpus_source;                         // how `cpus` was found, for the message
  std::map<std::string, std::string> env;          // the container's GPU_RUN_* variables (contract_env_names())
  Recorded recorded;                               // what a door recorded (read_recorded; from the host only)
  std::vector<ShmFile> files;                      // every entry of /dev/shm
  std::map<std::string, std::string> sysctls;      // kernel.shmmax / kernel.shmall when not the kernel default
  double memory_fraction_max = 0.5;                // from the host config
  std::uint64_t host_memory = 0;                   // the host's memory (from the host only); 0: unknown
  std::vector<RuntimeEntryFacts> runtime_entries;  // on the host: the engines' runtime entries
  std::string containerd_dropin;                   // on the host: gpu-run's containerd drop-in, if any
  std::string containerd_dropin_stale;             // which key of the CRI section changed since the drop-in copied it
};

}  // namespace gpurun
