#include "task_watch.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "contract.hpp"
#include "error.hpp"
#include "file_io.hpp"
#include "oci.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

constexpr std::uint32_t kDirMask = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR;
// runc writes init.pid to a temporary name and renames it (IN_MOVED_TO); a plain write closes it.
constexpr std::uint32_t kTaskMask = IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR;
constexpr const char* kPidFile = "init.pid";
// What a containerd namespace or container id may be (containerd's identifiers package: a letter
// or digit, then letters, digits, '_', '-', '.', at most 76 characters). Anything else under the
// task directory is not a task and is left alone, among them the ".<id>" containerd renames a
// task's directory to before it removes it (measured: read as a new task, each removed pod was
// reported gone twice).
bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 76 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

TaskWatcher::TaskWatcher(fs::path root) : root_(std::move(root)), fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
  if (!fd_) throw Error("inotify_init1", errno);
  std::error_code ec;
  if (!fs::is_directory(root_, ec))
    throw Error(root_.string() +
                " is not a directory: is containerd running, with its state there? "
                "(--containerd-state names containerd's state directory)");
  scan_all();
}

void TaskWatcher::watch(const fs::path& dir, std::uint32_t mask, const std::string& ns, const std::string& id) {
  const int wd = ::inotify_add_watch(fd_.get(), dir.c_str(), mask | IN_DONT_FOLLOW);
  if (wd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;  // gone already
    throw Error("inotify_add_watch " + dir.string(), errno);
  }
  watches_[wd] = Watched{ns, id};
}

void TaskWatcher::scan_all() {
  watch(root_, kDirMask, "", "");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_, ec)) {
    const std::string ns = e.path().filename().string();
    if (valid_name(ns) && e.is_directory(ec) && !e.is_symlink(ec)) scan_namespace(ns);
  }
}

void TaskWatcher::scan_namespace(const std::string& ns) {
  // The watch first, then the listing: a task made in between is seen by one or the other.
  watch(root_ / ns, kDirMask, ns, "");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / ns, ec)) {
    const std::string id = e.path().filename().string();
    if (!valid_name(id) || !e.is_directory(ec) || e.is_symlink(ec)) continue;
    watch(root_ / ns / id, kTaskMask, ns, id);
    check_task(ns, id);
  }
}

void TaskWatcher::check_task(const std::string& ns, const std::string& id) {
  if (started_.count({ns, id})) return;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(root_ / ns / id / kPidFile, ec))) return;
  started_.insert({ns, id});
  pending_.push_back(TaskEvent{true, ns, id});
}

void TaskWatcher::gone(const std::string& ns, const std::string& id) {
  if (started_.erase({ns, id})) pending_.push_back(TaskEvent{false, ns, id});
}

std::vector<TaskEvent> TaskWatcher::wait(std::chrono::milliseconds timeout) {
  if (pending_.empty()) {
    pollfd p{fd_.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n < 0 && errno != EINTR) throw Error("poll on inotify", errno);
  }
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
      if (w.ns.empty()) {  // the root: a namespace
        if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR) && valid_name(name)) scan_namespace(name);
      } else if (w.id.empty()) {  // a namespace: a task
        if (!valid_name(name) || !(ev->mask & IN_ISDIR)) continue;
        if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
          watch(root_ / w.ns / name, kTaskMask, w.ns, name);
          check_task(w.ns, name);
        } else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
          gone(w.ns, name);
        }
      } else if (name == kPidFile) {  // a task: its init process has a pid
        check_task(w.ns, w.id);
      }
    }
  }
  std::vector<TaskEvent> out;
  out.swap(pending_);
  return out;
}

bool is_kubelet_empty_dir(const std::string& source) {
  return source.find("/volumes/kubernetes.io~empty-dir/") != std::string::npos;
}

std::optional<ContainerInfo> task_container(const fs::path& root, const TaskEvent& task, std::string& why) {
  const fs::path dir = root / task.ns / task.id;
  ContainerInfo c;
  c.engine = "containerd";
  c.id = task.id;
  try {
    const std::string pid_text = read_small_file(dir / kPidFile, 32, "the task's init.pid");
    c.pid = static_cast<int>(parse_count(pid_text.substr(0, pid_text.find_first_of("\n ")), "init.pid", 1 << 22));
    const SpecFacts spec = spec_facts(load_spec(dir, SpecParts::kFacts), dir);
    if (auto t = spec.annotations.find(kCriContainerType); t != spec.annotations.end() && t->second == "sandbox") {
      why = "a pod's sandbox container";
      return std::nullopt;
    }
    c.env = spec.env;
    c.memory_limit = spec.memory_limit;
    // A memory-backed emptyDir bound at /dev/shm (the webhook's route) is the pod's own, not the
    // host's, though its source is no engine's shm.
    const bool empty_dir = is_kubelet_empty_dir(spec.shm_source.value_or(""));
    c.ipc_mode = uses_host_shm(spec) && !empty_dir ? "host" : "private";
    if (empty_dir) c.labels[kLabelEmptyDir] = "true";
    for (const auto& [k, v] : spec.annotations)
      if (k.rfind("gpu-run.", 0) == 0 || k.rfind("io.kubernetes.cri.", 0) == 0) c.labels[k] = v.substr(0, 256);
    // gpu-run sized it when a door recorded its request in the environment (the runtime, the
    // hook) or the pod asked for it in annotations.
    if (c.env.count(kEnvProfile) && !c.labels.count(kLabelProfile)) c.labels[kLabelProfile] = c.env.at(kEnvProfile);
    if (c.env.count(kEnvShmSize) && !c.labels.count(kLabelShmSize)) c.labels[kLabelShmSize] = c.env.at(kEnvShmSize);
    auto name = spec.annotations.find(kCriContainerName);
    c.name = name != spec.annotations.end() ? name->second.substr(0, 128) : "";
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  c.running = c.pid > 0;
  c.status = "running";
  return c;
}

}  // namespace gpurun
