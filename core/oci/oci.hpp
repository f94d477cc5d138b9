#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "oci/gpus.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// Bounds on container-controlled input: the OCI state on stdin and a bundle's config.json.
constexpr std::size_t kMaxStateBytes = 1 << 20;
constexpr std::size_t kMaxSpecBytes = 8 << 20;
constexpr std::size_t kMaxAnnotationBytes = 4096;

// The OCI state a runtime passes to a hook on stdin.
struct OciState {
  std::string id;
  int pid = 0;
  fs::path bundle;
  std::string status;
  std::map<std::string, std::string> annotations;
};

// Parses the state; throws Error on malformed JSON, a missing id/bundle or a bad pid.
OciState parse_state(const std::string& text);

// Reads up to kMaxStateBytes from `fd` (stdin) and parses it.
OciState read_state(int fd);

// Loads <bundle>/config.json (bounded, regular file only). kFacts keeps only what
// spec_facts reads (root, annotations, process.env and args, mounts, linux.{resources,devices,
// namespaces,cgroupsPath}) and skips the rest while parsing, e.g. Docker's seccomp profile: for the
// hook, which never writes the spec back.
enum class SpecParts { kWhole, kFacts };
nlohmann::json load_spec(const fs::path& bundle, SpecParts parts = SpecParts::kWhole);
// The parsing part of load_spec; `source` names the text in errors.
nlohmann::json parse_spec(const std::string& text, SpecParts parts, const std::string& source);

// What the spec's /dev/shm mount is: its type "tmpfs", a bind (type "bind" or a bind/rbind
// option, whatever the type), or another type.
enum class SpecShmType { kTmpfs, kBind, kOther };

// What sizing needs from a container's spec.
struct SpecFacts {
  fs::path rootfs;  // absolute
  std::map<std::string, std::string> annotations;
  std::map<std::string, std::string> env;
  std::vector<std::string> args;  // the command line: process.args, a pod's command and args
  std::optional<std::uint64_t> memory_limit;
  std::optional<std::string> cgroups_path;  // linux.cgroupsPath, as the engine wrote it
  // The memory limit of the pod's cgroup (the parent of cgroups_path), read by plan_container
  // (probe_pod_memory_limit) when it decides: the budget's limit when the spec has none of its own.
  std::optional<std::uint64_t> pod_memory_limit;
  // A limit the door will raise by the /dev/shm it plans (the webhook's raise policy), given
  // instead of memory_limit: no budget is checked against it, but an engine that takes a share of
  // the limit (Ray) plans from it and holds after the raise.
  std::optional<std::uint64_t> limit_raised_from;
  std::optional<double> cpu_quota;  // CPUs from quota/period
  std::optional<unsigned> cpuset_cpus;
  unsigned gpu_devices = 0;  // /dev/nvidiaN entries in linux.devices
  bool has_ipc_namespace = false;
  bool ipc_namespace_path = false;  // joins an existing ipc namespace (path set)
  // The spec's /dev/shm mount, if any.
  std::optional<SpecShmType> shm_type;
  std::optional<std::string> shm_source;
  std::optional<std::uint64_t> shm_size;  // size= option of a tmpfs entry
  // What the door knows of GPUs reaching the container beyond linux.devices (gpu-run's
  // --gpu-request); unknown from a spec.
  GpuReach gpu_reach = GpuReach::unknown;
  std::string gpu_reach_why;
};

// True when a /dev/shm bind's source is an engine's own shm tmpfs: containerd's pod shm
// (.../io.containerd.grpc.v1.cri/sandboxes/<id>/shm), docker's (.../containers/<id>/mounts/shm),
// podman's and CRI-O's (.../userdata/shm).
bool is_engine_shm_source(const std::string& source);

// True for a kubelet emptyDir's path (<kubelet root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>).
bool is_kubelet_empty_dir(const std::string& source);

// True when the container's /dev/shm is the host's: no ipc namespace of its own (--ipc=host), or
// a bind from anything but an engine's own shm: the host's /dev/shm (containerd's app containers
// of a hostIPC pod), a hostPath volume, `-v /run:/dev/shm`. Such a tmpfs is never resized.
bool uses_host_shm(const SpecFacts& spec);

// Extracts SpecFacts; tolerant of missing sections, strict about types it reads.
SpecFacts spec_facts(const nlohmann::json& spec, const fs::path& bundle);

// Index of the mount whose destination is /dev/shm, or -1.
int find_shm_mount(const nlohmann::json& spec);

// Sets size=<bytes> in a tmpfs mount's options (replacing an existing size=).
void set_tmpfs_size(nlohmann::json& mount, std::uint64_t bytes);

// Adds a hook entry at `stage` unless one with the same path is there. Returns true if added.
bool add_hook(nlohmann::json& spec, const std::string& stage, const std::string& path,
              const std::vector<std::string>& args);

}  // namespace gpurun
