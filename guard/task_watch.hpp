#pragma once

// The node guard's discovery: the directory an engine keeps for every running container, watched
// with inotify, so a container is seen when its runtime has written its pid, not at the next poll
// of an engine CLI. containerd's runtime v2 task directories (<state>/io.containerd.runtime.v2.task/
// <namespace>/<id>/, with the bundle's config.json and the init process's init.pid): Kubernetes'
// pods (namespace k8s.io), Docker's containers (moby) and any other client's; podman's
// (<runroot>/overlay-containers/<id>/userdata/pidfile, conmon's and runc's).

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/fd.hpp"
#include "base/or_why.hpp"
#include "oci/container.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// The directory under containerd's state directory that holds the tasks.
inline constexpr const char* kContainerdTaskDir = "io.containerd.runtime.v2.task";

// A containerd identifier (a namespace or a container id: a letter or digit, then letters, digits,
// '_', '-', '.', at most 76 characters).
bool is_containerd_name(const std::string& name);
// A podman container id: 64 lowercase hex digits.
bool is_hex_id(const std::string& name);

// Where an engine keeps a directory per container, as TaskWatcher reads it. The defaults are
// containerd's.
struct TaskLayout {
  explicit TaskLayout(fs::path dir = {}) : root(std::move(dir)) {}
  fs::path root;                      // containerd: <state>/io.containerd.runtime.v2.task
  std::string engine = "containerd";  // whose containers: containerd, docker or podman
  // root/<namespace>/<id> (containerd), else root/<id> (podman: a TaskEvent's ns is "").
  bool namespaced = true;
  std::set<std::string> namespaces;  // when namespaced, only these (empty: every one)
  bool watches_namespace(const std::string& name) const {
    return is_containerd_name(name) && (namespaces.empty() || namespaces.count(name));
  }
  // Below a container's directory, the file that holds its init process's pid once it has one.
  std::vector<std::string> pid_path{"init.pid"};
  // Gone when its init process exits, not only when its directory does: podman keeps a stopped
  // container's directory until it is removed.
  bool gone_on_exit = false;
  // The names under root (and a namespace) that are containers; anything else is left alone.
  bool (*is_id)(const std::string&) = is_containerd_name;
};

// containerd's tasks under its state directory, in `namespaces` (empty: every one).
TaskLayout containerd_layout(const fs::path& state, std::set<std::string> namespaces = {});

struct TaskEvent {
  bool started = false;  // else gone
  std::string ns;
  std::string id;
  int pid = 0;  // when started: its init process, from the pid file
};

class TaskWatcher {
 public:
  // Watches containerd's task root (<state>/io.containerd.runtime.v2.task).
  explicit TaskWatcher(fs::path root);
  // Watches `layout`. Throws Error when its root is not a directory or inotify cannot be set up.
  // The first wait() reports every container already running.
  explicit TaskWatcher(TaskLayout layout);

  // Events since the last call, waiting up to `timeout` for the first one, or until `wake_fd`
  // (when given) is readable. A container started again (a new pid in its pid file) is reported
  // gone, then started.
  std::vector<TaskEvent> wait(std::chrono::milliseconds timeout, int wake_fd = -1);

  const TaskLayout& layout() const { return layout_; }

 private:
  enum class Level { kRoot, kNamespace, kTask };
  struct Watched {
    Level level = Level::kRoot;
    std::string ns;
    std::string id;         // a task's
    std::size_t depth = 0;  // a task's: directories below its own on the way to its pid file
  };
  struct Started {
    int pid = 0;
    UniqueFd exited;  // with gone_on_exit: a pidfd of its init process
  };
  using Key = std::pair<std::string, std::string>;  // (ns, id)

  fs::path dir_of(const std::string& ns, const std::string& id = "", std::size_t depth = 0) const;
  bool watch(const fs::path& dir, std::uint32_t mask, Watched what);
  void scan_all();
  void scan_namespace(const std::string& ns);
  void watch_task(const std::string& ns, const std::string& id);
  void check_task(const std::string& ns, const std::string& id);
  void gone(const std::string& ns, const std::string& id);
  void check_exits(int timeout_ms, int wake_fd);

  TaskLayout layout_;
  UniqueFd fd_;
  std::map<int, Watched> watches_;
  std::map<Key, Started> started_;
  std::vector<TaskEvent> pending_;
};

// A task's container as the guard needs it, from its init.pid and config.json (bounded reads):
// the pid, the environment, the memory limit, the annotations gpu-run and the CRI write
// (guard_annotations), whether /dev/shm is a kubelet's emptyDir, and for a pod's container its
// name. nullopt with `why` set for what is not a container to guard: a pod's sandbox (pause)
// container, a task without a readable pid or spec.
OrWhy<ContainerInfo> task_container(const fs::path& root, const TaskEvent& task);
// task_container's why for a pod's sandbox (pause) container: passed over without a word.
inline constexpr const char* kSandboxContainer = "a pod's sandbox container";

// The annotations of a spec the guard keeps: gpu-run.* (the decision record, a pod's request)
// and io.kubernetes.cri.* (a pod's names), keys and values bounded.
std::map<std::string, std::string> guard_annotations(const std::map<std::string, std::string>& annotations);

// The bundle of an engine's task: the directory of its pid file (containerd's and Docker's task
// directory, podman's userdata), where the runtime wrote its config.json.
fs::path task_bundle(const TaskLayout& layout, const TaskEvent& task);

// guard_annotations of the spec in `bundle`; none when it cannot be read.
std::map<std::string, std::string> bundle_annotations(const fs::path& bundle);

// The CRI annotations of a pod's container, as containerd writes them into its spec.
inline constexpr const char* kCriContainerType = "io.kubernetes.cri.container-type";
inline constexpr const char* kCriContainerName = "io.kubernetes.cri.container-name";
inline constexpr const char* kCriSandboxNamespace = "io.kubernetes.cri.sandbox-namespace";
inline constexpr const char* kCriSandboxName = "io.kubernetes.cri.sandbox-name";
inline constexpr const char* kCriSandboxUid = "io.kubernetes.cri.sandbox-uid";

}  // namespace gpurun
