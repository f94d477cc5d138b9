#include "oci/container.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/process.hpp"

namespace gpurun {

std::string short_id(const ContainerInfo& c) { return c.id.substr(0, 12); }

std::string display_name(const ContainerInfo& c) { return c.name.empty() ? short_id(c) : c.name; }

IpcMode parse_ipc_mode(const std::string& mode) {
  IpcMode m;
  m.text = mode;
  static const std::string kJoined = "container:";
  if (mode.empty() || mode == "private")
    m.kind = IpcKind::kPrivate;
  else if (mode == "shareable")
    m.kind = IpcKind::kShareable;
  else if (mode == "none")
    m.kind = IpcKind::kNone;
  else if (mode == "host")
    m.kind = IpcKind::kHost;
  else if (mode.compare(0, kJoined.size(), kJoined) == 0 && mode.size() > kJoined.size()) {
    m.kind = IpcKind::kJoined;
    m.owner = mode.substr(kJoined.size());
  } else {
    m.kind = IpcKind::kOther;
  }
  return m;
}

IpcMode ipc_mode_of_spec(const SpecFacts& spec) {
  IpcMode m;
  const std::string source = spec.shm_source.value_or("");
  if (spec.shm_type == SpecShmType::kBind && is_kubelet_empty_dir(source))
    m.kind = IpcKind::kShareable;
  else if (uses_host_shm(spec))
    m.kind = IpcKind::kHost;
  else if (spec.shm_type == SpecShmType::kBind)
    m.kind = IpcKind::kShareable;  // an engine's shm: the pod sandbox's, shared by its containers
  return m;
}

std::string ipc_mode_name(const IpcMode& ipc) {
  if (!ipc.text.empty()) return ipc.text;
  switch (ipc.kind) {
    case IpcKind::kPrivate:
      return "private";
    case IpcKind::kShareable:
      return "shareable";
    case IpcKind::kJoined:
      return "container:" + ipc.owner;
    case IpcKind::kNone:
      return "none";
    case IpcKind::kHost:
      return "host";
    case IpcKind::kOther:
      break;
  }
  return "other";
}

ContainerInfo parse_inspect(const std::string& text, const std::string& engine) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(engine + " inspect: malformed output: " + e.what());
  }
  if (doc.is_array()) {
    if (doc.empty()) throw usage_error(engine + " inspect: no such container");
    doc = doc[0];
  }
  if (!doc.is_object()) throw Error(engine + " inspect: unexpected output");
  ContainerInfo c;
  c.engine = engine;
  c.id = doc.value("Id", std::string());
  c.name = doc.value("Name", std::string());
  if (!c.name.empty() && c.name[0] == '/') c.name.erase(0, 1);
  const auto state = doc.value("State", nlohmann::json::object());
  c.running = state.value("Running", false);
  c.pid = state.value("Pid", 0);
  if (state.contains("Status") && state["Status"].is_string()) c.status = state["Status"].get<std::string>();
  if ((c.status == "exited" || c.status == "dead") && state.contains("ExitCode") &&
      state["ExitCode"].is_number_integer())
    c.exit_code = state["ExitCode"].get<int>();
  if (state.contains("OOMKilled") && state["OOMKilled"].is_boolean()) c.oom_killed = state["OOMKilled"].get<bool>();
  const auto config = doc.value("Config", nlohmann::json::object());
  c.image = config.value("Image", doc.value("ImageName", std::string()));
  if (config.contains("Labels") && config["Labels"].is_object())
    for (const auto& [k, v] : config["Labels"].items())
      if (v.is_string()) c.labels[k] = v.get<std::string>();
  if (config.contains("Env") && config["Env"].is_array())
    for (const auto& e : config["Env"]) {
      if (!e.is_string()) continue;
      const std::string s = e.get<std::string>();
      auto eq = s.find('=');
      if (eq != std::string::npos) c.env[s.substr(0, eq)] = s.substr(eq + 1);
    }
  const auto host = doc.value("HostConfig", nlohmann::json::object());
  c.ipc = parse_ipc_mode(host.value("IpcMode", std::string()));
  if (host.contains("Memory") && host["Memory"].is_number_integer() && host["Memory"].get<std::int64_t>() > 0)
    c.memory_limit = host["Memory"].get<std::uint64_t>();
  if (host.contains("ShmSize") && host["ShmSize"].is_number_integer() && host["ShmSize"].get<std::int64_t>() > 0)
    c.shm_size = host["ShmSize"].get<std::uint64_t>();
  return c;
}

ContainerInfo inspect_container(const std::string& engine, const std::string& name_or_id) {
  Captured r = run_capture({engine, "inspect", "--type", "container", name_or_id});
  if (r.exit_code != 0) {
    std::string why = r.err;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    throw usage_error("container '" + name_or_id + "': " + engine + " inspect failed" +
                      (why.empty() ? "" : ": " + why) + " (is it running? wrong --engine?)");
  }
  return parse_inspect(r.out, engine);
}

namespace {

ShmUsage usage_of(const struct statvfs& st) {
  ShmUsage u;
  u.size = static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
  u.used = static_cast<std::uint64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
  return u;
}

}  // namespace

std::optional<ShmUsage> shm_usage_at(const fs::path& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return std::nullopt;
  return usage_of(st);
}

namespace {

// The container's /dev/shm below its root, never through a symlink: the image controls the path,
// and an absolute symlink at /dev/shm opened through /proc/PID/root would resolve on the host.
// Only a tmpfs: a /dev/shm that is a plain directory (no mount there, or a process in a chroot or
// a container being torn down) would read as the disk below it, a peak of gigabytes the job never
// wrote (a --record once printed "28.6GiB of 252GiB", the host's root disk, for a job given 32m).
UniqueFd open_container_shm(int pid) {
  const UniqueFd root(::open(("/proc/" + std::to_string(pid) + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return UniqueFd();
  UniqueFd shm(open_dir_in_root(root.get(), "dev/shm", Resolve::kNoSymlinks));
  struct statfs fs {};
  if (!shm || ::fstatfs(shm.get(), &fs) != 0 || fs.f_type != TMPFS_MAGIC) return UniqueFd();
  return shm;
}

}  // namespace

std::optional<ShmUsage> shm_usage_of_pid(int pid) {
  if (pid <= 0) return std::nullopt;
  const UniqueFd shm = open_container_shm(pid);
  struct statvfs st {};
  if (!shm || ::fstatvfs(shm.get(), &st) != 0) return std::nullopt;
  return usage_of(st);
}

ShmHandle::ShmHandle(int pid, Mode mode) : pid_(pid), pidfd_(open_pidfd(pid)) {
  // The pidfd first: a descriptor opened after the process was gone would read another's files.
  if (pidfd_ && mode == Mode::kHeld) shm_ = open_container_shm(pid);
}

std::optional<ShmUsage> ShmHandle::sample() const {
  if (!pidfd_) return shm_usage_of_pid(pid_);
  const auto exited = [this] {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;  // it exited (or the poll failed)
  };
  if (!shm_) {
    // kWalk, or not a tmpfs when the handle was made: by the path, kept only if the pid is still
    // the process.
    const auto usage = shm_usage_of_pid(pid_);
    return exited() ? std::nullopt : usage;
  }
  if (exited()) return std::nullopt;
  struct statvfs st {};
  if (::fstatvfs(shm_.get(), &st) != 0) return std::nullopt;
  return usage_of(st);
}

}  // namespace gpurun
