#include "guard/task_watch.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/process.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "oci/oci.hpp"

namespace gpurun {
namespace {

constexpr std::uint32_t kDirMask = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR;
// runc writes its pid file to a temporary name and renames it (IN_MOVED_TO); a plain write closes it.
constexpr std::uint32_t kTaskMask = IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR;
constexpr const char* kPidFile = "init.pid";

}  // namespace

// Anything else under a task directory is not a task and is left alone, among them the ".<id>"
// containerd renames a task's directory to before it removes it (measured: read as a new task,
// each removed pod was reported gone twice).
bool is_containerd_name(const std::string& s) {
  if (s.empty() || s.size() > 76 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

bool is_hex_id(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

TaskLayout containerd_layout(const fs::path& state, std::set<std::string> namespaces) {
  TaskLayout layout(state / kContainerdTaskDir);
  layout.namespaces = std::move(namespaces);
  return layout;
}

TaskWatcher::TaskWatcher(fs::path root) : TaskWatcher(TaskLayout(std::move(root))) {}

TaskWatcher::TaskWatcher(TaskLayout layout)
    : layout_(std::move(layout)), fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
  if (!fd_) throw Error("inotify_init1", errno);
  if (layout_.pid_path.empty()) throw Error("TaskWatcher: a layout without a pid file");
  std::error_code ec;
  if (!fs::is_directory(layout_.root, ec))
    throw Error(layout_.root.string() + " is not a directory: is " + layout_.engine +
                " running, with its state there?" +
                (layout_.engine == "containerd" ? " (--containerd-state names containerd's state directory)" : ""));
  scan_all();
}

fs::path TaskWatcher::dir_of(const std::string& ns, const std::string& id, std::size_t depth) const {
  fs::path dir = layout_.namespaced ? layout_.root / ns : layout_.root;
  if (id.empty()) return dir;
  dir /= id;
  for (std::size_t i = 0; i < depth; ++i) dir /= layout_.pid_path[i];
  return dir;
}

bool TaskWatcher::watch(const fs::path& dir, std::uint32_t mask, Watched what) {
  const int wd = ::inotify_add_watch(fd_.get(), dir.c_str(), mask | IN_DONT_FOLLOW);
  if (wd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;  // gone already, not there yet, or a symlink
    throw Error("inotify_add_watch " + dir.string(), errno);
  }
  watches_[wd] = std::move(what);
  return true;
}

void TaskWatcher::scan_all() {
  if (!layout_.namespaced) return scan_namespace("");
  watch(layout_.root, kDirMask, Watched{Level::kRoot, "", "", 0});
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layout_.root, ec)) {
    const std::string ns = e.path().filename().string();
    if (layout_.watches_namespace(ns) && e.is_directory(ec) && !e.is_symlink(ec)) scan_namespace(ns);
  }
}

void TaskWatcher::scan_namespace(const std::string& ns) {
  // The watch first, then the listing: a task made in between is seen by one or the other.
  watch(dir_of(ns), kDirMask, Watched{Level::kNamespace, ns, "", 0});
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_of(ns), ec)) {
    const std::string id = e.path().filename().string();
    if (layout_.is_id(id) && e.is_directory(ec) && !e.is_symlink(ec)) watch_task(ns, id);
  }
}

void TaskWatcher::watch_task(const std::string& ns, const std::string& id) {
  // The task's directory and each one on the way to its pid file, the watch before the look; one
  // not there yet is watched when its parent's watch sees it made.
  for (std::size_t depth = 0; depth < layout_.pid_path.size(); ++depth) {
    const bool holds_pid = depth + 1 == layout_.pid_path.size();
    if (!watch(dir_of(ns, id, depth), holds_pid ? kTaskMask : kDirMask, Watched{Level::kTask, ns, id, depth})) return;
  }
  check_task(ns, id);
}

void TaskWatcher::check_task(const std::string& ns, const std::string& id) {
  fs::path relative = layout_.namespaced ? fs::path(ns) / id : fs::path(id);
  for (const std::string& part : layout_.pid_path) relative /= part;
  const std::optional<std::string> text = read_below(layout_.root, relative, 32);
  if (!text) return;  // none yet (or not a plain file: left alone)
  int pid = 0;
  try {
    pid = static_cast<int>(parse_count(text->substr(0, text->find_first_of("\n ")), kPidFile, 1 << 22));
  } catch (const Error&) {
    return;  // being written
  }
  const Key key{ns, id};
  if (auto it = started_.find(key); it != started_.end()) {
    if (it->second.pid == pid) return;
    gone(ns, id);  // started again: a new init process
  }
  UniqueFd exited;
  if (layout_.gone_on_exit) {
    exited = open_pidfd(pid);
    if (!exited && errno == ESRCH) return;  // a stopped container's pid file: its process is gone
  }
  started_.emplace(key, Started{pid, std::move(exited)});
  pending_.push_back(TaskEvent{true, ns, id, pid});
}

void TaskWatcher::gone(const std::string& ns, const std::string& id) {
  if (started_.erase({ns, id})) pending_.push_back(TaskEvent{false, ns, id});
}

void TaskWatcher::check_exits(int timeout_ms, int wake_fd) {
  std::vector<pollfd> fds{pollfd{fd_.get(), POLLIN, 0}, pollfd{wake_fd, POLLIN, 0}};  // a negative fd: ignored
  std::vector<Key> keys;
  for (const auto& [key, s] : started_)
    if (s.exited) {
      fds.push_back(pollfd{s.exited.get(), POLLIN, 0});
      keys.push_back(key);
    }
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0 && errno != EINTR) throw Error("poll on inotify", errno);
  for (std::size_t i = 2; n > 0 && i < fds.size(); ++i)
    if (fds[i].revents) gone(keys[i - 2].first, keys[i - 2].second);
}

std::vector<TaskEvent> TaskWatcher::wait(std::chrono::milliseconds timeout, int wake_fd) {
  // Exits before the directories' events: a container started again is then seen started anew.
  check_exits(pending_.empty() ? static_cast<int>(timeout.count()) : 0, wake_fd);
  alignas(inotify_event) char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      throw Error("read inotify", errno);
    }
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {  // events were lost: look again at everything
        for (const auto& [wd, w] : watches_) ::inotify_rm_watch(fd_.get(), wd);
        watches_.clear();
        scan_all();
        std::vector<Key> vanished;
        std::error_code ec;
        for (const auto& [key, s] : started_)
          if (!fs::is_directory(fs::symlink_status(dir_of(key.first, key.second), ec))) vanished.push_back(key);
        for (const Key& key : vanished) gone(key.first, key.second);
        continue;
      }
      auto it = watches_.find(ev->wd);
      if (it == watches_.end()) continue;
      if (ev->mask & IN_IGNORED) {  // the directory was removed
        watches_.erase(it);
        continue;
      }
      const Watched w = it->second;
      const std::string name = ev->len ? std::string(ev->name) : "";
      const bool made = ev->mask & (IN_CREATE | IN_MOVED_TO);
      const bool dir = ev->mask & IN_ISDIR;
      if (w.level == Level::kRoot) {  // a namespace
        if (made && dir && layout_.watches_namespace(name)) scan_namespace(name);
      } else if (w.level == Level::kNamespace) {  // a task
        if (!layout_.is_id(name) || !dir) continue;
        if (made)
          watch_task(w.ns, name);
        else if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
          gone(w.ns, name);
      } else if (w.depth + 1 < layout_.pid_path.size()) {  // a directory on the way to the pid file
        if (made && dir && name == layout_.pid_path[w.depth]) watch_task(w.ns, w.id);
      } else if (name == layout_.pid_path.back()) {  // its init process has a pid
        check_task(w.ns, w.id);
      }
    }
  }
  std::vector<TaskEvent> out;
  out.swap(pending_);
  return out;
}

std::map<std::string, std::string> guard_annotations(const std::map<std::string, std::string>& annotations) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : annotations)
    if (k.rfind(kAnnotationPrefix, 0) == 0 || k.rfind("io.kubernetes.cri.", 0) == 0)
      out.emplace(k.substr(0, 256), v.substr(0, k == kDecisionKey ? kMaxDecisionBytes : 256));
  return out;
}

fs::path task_bundle(const TaskLayout& layout, const TaskEvent& task) {
  fs::path dir = layout.namespaced ? layout.root / task.ns / task.id : layout.root / task.id;
  for (std::size_t i = 0; i + 1 < layout.pid_path.size(); ++i) dir /= layout.pid_path[i];
  return dir;
}

std::map<std::string, std::string> bundle_annotations(const fs::path& bundle) {
  try {
    return guard_annotations(spec_facts(load_spec(bundle, SpecParts::kFacts), bundle).annotations);
  } catch (const Error&) {
    return {};  // no spec there (an engine that keeps it elsewhere): no record from the runtime
  }
}

OrWhy<ContainerInfo> task_container(const fs::path& root, const TaskEvent& task) {
  const fs::path dir = root / task.ns / task.id;
  ContainerInfo c;
  c.engine = "containerd";
  c.id = task.id;
  try {
    const std::string pid_text = read_small_file(dir / kPidFile, 32, "the task's init.pid");
    c.pid = static_cast<int>(parse_count(pid_text.substr(0, pid_text.find_first_of("\n ")), "init.pid", 1 << 22));
    const SpecFacts spec = spec_facts(load_spec(dir, SpecParts::kFacts), dir);
    if (auto t = spec.annotations.find(kCriContainerType); t != spec.annotations.end() && t->second == "sandbox")
      return OrWhy<ContainerInfo>::none(kSandboxContainer);
    c.env = spec.env;
    c.memory_limit = spec.memory_limit;
    // A memory-backed emptyDir bound at /dev/shm (the webhook's route) is the pod's own, not the
    // host's, though its source is no engine's shm.
    c.shm_empty_dir = is_kubelet_empty_dir(spec.shm_source.value_or(""));
    c.ipc = ipc_mode_of_spec(spec);
    c.annotations = guard_annotations(spec.annotations);
    auto name = spec.annotations.find(kCriContainerName);
    c.name = name != spec.annotations.end() ? name->second.substr(0, 128) : "";
  } catch (const Error& e) {
    return OrWhy<ContainerInfo>::none(e.what());
  }
  c.running = c.pid > 0;
  c.status = "running";
  return c;
}

}  // namespace gpurun
