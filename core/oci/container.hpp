#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "base/fd.hpp"
#include "oci/oci.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// How a container got its IPC namespace, and so its /dev/shm.
enum class IpcKind {
  kPrivate,    // its own tmpfs, mounted by the runtime in its mount namespace
  kShareable,  // a tmpfs on the host bound in, which others may share: docker's "shareable", a pod's
  kJoined,     // another container's ("container:X")
  kNone,       // no /dev/shm at all ("none")
  kHost,       // the host's: its IPC namespace, or a bind of the host's /dev/shm or a host path
  kOther,      // anything else an engine may say
};

// A container's IPC mode as each engine's discovery found it: the kind, the owner of a joined
// namespace, and the engine's own words (inspect's IpcMode; empty for containerd's spec), kept
// for messages only.
struct IpcMode {
  IpcKind kind = IpcKind::kPrivate;
  std::string owner;  // X of "container:X"
  std::string text;
};

// Parses `docker|podman inspect`'s HostConfig.IpcMode ("" is the engine's default: private).
IpcMode parse_ipc_mode(const std::string& mode);

// The IPC mode an OCI spec gives (containerd's tasks): no ipc namespace of its own, or a bind of
// anything but an engine's shm or a kubelet emptyDir at /dev/shm, is the host's; a bind of those
// is shareable (the pod's); else private.
IpcMode ipc_mode_of_spec(const SpecFacts& spec);

// How a message names the mode: the engine's words, else the kind's ("host", "container:X", ...).
std::string ipc_mode_name(const IpcMode& ipc);

// A container as the ctl commands see it: what `docker|podman inspect` says, or for containerd's
// own tasks what their OCI spec says, read once; and the spec's annotations where the engine
// keeps the spec (the guard reads them from the bundle: the runtime's decision record).
struct ContainerInfo {
  std::string engine;  // docker | podman | containerd
  std::string id;
  std::string name;
  std::string image;
  int pid = 0;  // 0 when not running
  bool running = false;
  std::string status;                              // State.Status: created, running, exited, dead, ...
  std::optional<int> exit_code;                    // State.ExitCode once it has exited
  bool oom_killed = false;                         // State.OOMKilled
  IpcMode ipc;                                     // from inspect's HostConfig.IpcMode, or the spec
  std::optional<std::uint64_t> memory_limit;       // HostConfig.Memory, when set
  std::optional<std::uint64_t> shm_size;           // HostConfig.ShmSize, when set
  std::map<std::string, std::string> labels;       // the engine's labels
  std::map<std::string, std::string> annotations;  // the OCI spec's, when read (gpu-run.*, io.kubernetes.cri.*)
  std::map<std::string, std::string> env;
  bool shm_empty_dir = false;  // /dev/shm is a kubelet's memory-backed emptyDir (the webhook's route)
};

// The first 12 characters of the id, as `docker ps` shows it.
std::string short_id(const ContainerInfo& c);
// The container's name, else its short id: how a message names a container.
std::string display_name(const ContainerInfo& c);

// Parses the JSON array `inspect` prints (first element). Throws Error when malformed.
ContainerInfo parse_inspect(const std::string& json_text, const std::string& engine);

// Runs `<engine> inspect <name_or_id>` once. Throws Error (naming the container) when the
// engine fails or does not know it.
ContainerInfo inspect_container(const std::string& engine, const std::string& name_or_id);

// Size and use of a tmpfs, in bytes.
struct ShmUsage {
  std::uint64_t size = 0;
  std::uint64_t used = 0;
};

// statvfs of `path`; nullopt when it cannot be read (the container exited).
std::optional<ShmUsage> shm_usage_at(const fs::path& path);

// The container's /dev/shm, through /proc/<pid>/root (no process started per sample); nullopt
// when it is not a tmpfs (nothing mounted there: the disk below would read as its use).
std::optional<ShmUsage> shm_usage_of_pid(int pid);

// A container's /dev/shm held open for sampling it many times a second: an O_PATH descriptor of
// it, read with fstatvfs (no walk of /proc/<pid>/root/dev/shm each sample: 0.49 against 2.71 us
// a sample, measured by hand on this machine), and a pidfd of its process, which says when it has
// exited (the descriptor would go on reading the tmpfs, and keep it, after). Without pidfd_open
// (Linux before 5.3) it samples by the path, as shm_usage_of_pid. With kWalk it holds only the
// pidfd and walks the path each sample, so a /dev/shm mounted after the process was found (an
// engine that reports the pid before its mounts are done) is seen; the pidfd still keeps a reading
// of another process that took the pid out.
class ShmHandle {
 public:
  enum class Mode { kHeld, kWalk };
  explicit ShmHandle(int pid, Mode mode = Mode::kHeld);
  // nullopt once the process has exited or its /dev/shm cannot be read.
  std::optional<ShmUsage> sample() const;

 private:
  int pid_;
  UniqueFd shm_;
  UniqueFd pidfd_;
};

}  // namespace gpurun
