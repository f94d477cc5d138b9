#pragma once

// The node guard's discovery on containerd: the runtime v2 task directories containerd writes
// for every running container (<state>/io.containerd.runtime.v2.task/<namespace>/<id>/, with the
// bundle's config.json and the init process's init.pid), watched with inotify, so a container is
// seen when runc has written its pid, not at the next poll of an engine CLI. Kubernetes' pods
// (namespace k8s.io), Docker's containers (moby) and any other client's.

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "container.hpp"
#include "fd.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// The directory under containerd's state directory that holds the tasks.
inline constexpr const char* kContainerdTaskDir = "io.containerd.runtime.v2.task";

struct TaskEvent {
  bool started = false;  // else gone
  std::string ns;
  std::string id;
};

class TaskWatcher {
 public:
  // Watches `root` (<state>/io.containerd.runtime.v2.task). Throws Error when it is not a
  // directory or inotify cannot be set up. The first wait() reports every task already running.
  explicit TaskWatcher(fs::path root);

  // Events since the last call, waiting up to `timeout` for the first one.
  std::vector<TaskEvent> wait(std::chrono::milliseconds timeout);

 private:
  void watch(const fs::path& dir, std::uint32_t mask, const std::string& ns, const std::string& id);
  void scan_all();
  void scan_namespace(const std::string& ns);
  void check_task(const std::string& ns, const std::string& id);
  void gone(const std::string& ns, const std::string& id);

  struct Watched {
    std::string ns;  // "" for the root
    std::string id;  // "" for the root and a namespace
  };
  fs::path root_;
  UniqueFd fd_;
  std::map<int, Watched> watches_;
  std::set<std::pair<std::string, std::string>> started_;  // (ns, id) reported as started
  std::vector<TaskEvent> pending_;
};

// A task's container as the guard needs it, from its init.pid and config.json (bounded reads):
// the pid, the environment, the memory limit, the annotations gpu-run and the CRI write (kept as
// labels: gpu-run.* and io.kubernetes.cri.*), and for a pod's container its name. nullopt with
// `why` set for what is not a container to guard: a pod's sandbox (pause) container, a task
// without a readable pid or spec.
std::optional<ContainerInfo> task_container(const fs::path& root, const TaskEvent& task, std::string& why);

// True for a kubelet emptyDir's path (<kubelet root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>).
bool is_kubelet_empty_dir(const std::string& source);
// The label task_container sets on a container whose /dev/shm is a kubelet emptyDir.
inline constexpr const char* kLabelEmptyDir = "gpu-run.guard/empty-dir";

// The CRI annotations of a pod's container, as containerd writes them into its spec.
inline constexpr const char* kCriContainerType = "io.kubernetes.cri.container-type";
inline constexpr const char* kCriContainerName = "io.kubernetes.cri.container-name";
inline constexpr const char* kCriSandboxNamespace = "io.kubernetes.cri.sandbox-namespace";
inline constexpr const char* kCriSandboxName = "io.kubernetes.cri.sandbox-name";
inline constexpr const char* kCriSandboxUid = "io.kubernetes.cri.sandbox-uid";

}  // namespace gpurun
