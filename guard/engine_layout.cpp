#include "guard/engine_layout.hpp"

#include <nlohmann/json.hpp>
#include <sstream>
#include <toml.hpp>

#include "base/env.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/process.hpp"

namespace gpurun {
namespace {

constexpr const char* kDefaultDockerSocket = "/var/run/docker.sock";
constexpr const char* kDefaultExecRoot = "/var/run/docker";
constexpr const char* kSystemContainerdSocket = "/run/containerd/containerd.sock";
constexpr const char* kDefaultContainerdConfig = "/etc/containerd/config.toml";
constexpr const char* kDefaultContainerdState = "/run/containerd";

std::vector<std::string> process_argv(const fs::path& proc, int pid) {
  std::vector<std::string> argv;
  const std::optional<std::string> text = read_below(proc, fs::path(std::to_string(pid)) / "cmdline", 1 << 20);
  if (!text) return argv;
  std::istringstream in(*text);
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  return argv;
}

// A path from a process's command line, relative to its working directory.
fs::path process_path(const fs::path& proc, int pid, const std::string& path) {
  if (fs::path(path).is_absolute()) return path;
  std::error_code ec;
  return fs::read_symlink(proc / std::to_string(pid) / "cwd", ec) / path;
}

// The string `key` of a JSON object in `path` (dockerd's daemon.json), nullopt when the file or
// the key is not there.
std::optional<std::string> json_string(const fs::path& path, const char* key) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    const nlohmann::json doc = nlohmann::json::parse(read_small_file(path, 1 << 20, "dockerd's config"));
    if (doc.is_object() && doc.contains(key) && doc[key].is_string()) return doc[key].get<std::string>();
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// containerd's state directory: its --state, else `state` in its config file.
OrWhy<fs::path> containerd_state(const fs::path& proc, int pid) {
  const std::vector<std::string> argv = process_argv(proc, pid);
  if (auto state = flag_value(argv, "state")) return process_path(proc, pid, *state);
  std::optional<std::string> config = flag_value(argv, "config");
  if (!config) config = flag_value(argv, "c");
  const fs::path file = config ? process_path(proc, pid, *config) : fs::path(kDefaultContainerdConfig);
  std::error_code ec;
  if (!config && !fs::exists(file, ec)) return fs::path(kDefaultContainerdState);
  try {
    std::istringstream in(read_small_file(file, 1 << 20, "containerd's config"));
    const toml::value doc = toml::parse(in, file.string());
    return process_path(proc, pid, toml::find_or<std::string>(doc, "state", std::string(kDefaultContainerdState)));
  } catch (const std::exception& e) {
    return OrWhy<fs::path>::none("cannot read containerd's config " + file.string() + ": " +
                                 std::string(e.what()).substr(0, 200));
  }
}

}  // namespace

std::optional<std::string> flag_value(const std::vector<std::string>& argv, const std::string& name) {
  std::optional<std::string> value;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") break;
    const std::size_t dashes = a.rfind("--", 0) == 0 ? 2 : a.rfind('-', 0) == 0 ? 1 : 0;
    if (dashes == 0 || a.compare(dashes, name.size(), name) != 0) continue;
    if (a.size() == dashes + name.size()) {
      if (i + 1 < argv.size()) value = argv[++i];
    } else if (a[dashes + name.size()] == '=') {
      value = a.substr(dashes + name.size() + 1);
    }
  }
  return value;
}

std::vector<unsigned long> unix_listeners(const std::string& proc_net_unix, const std::string& path) {
  constexpr unsigned long kAcceptCon = 0x10000;  // __SO_ACCEPTCON: a listening socket
  std::vector<unsigned long> out;
  std::istringstream lines(proc_net_unix);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, st, inode;
    if (!(fields >> num >> refs >> protocol >> flags >> type >> st >> inode)) continue;
    std::string bound;
    std::getline(fields >> std::ws, bound);
    if (bound != path) continue;
    try {
      if (std::stoul(flags, nullptr, 16) & kAcceptCon) out.push_back(std::stoul(inode));
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::optional<int> socket_server(const fs::path& proc, const fs::path& path, const std::string& comm) {
  std::optional<std::string> table;
  try {
    table = read_small_file(proc / "net" / "unix", 64 << 20, "the unix sockets");  // /proc/net: a symlink
  } catch (const Error&) {
    return std::nullopt;
  }
  std::vector<unsigned long> inodes = unix_listeners(*table, path.string());
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  if (!ec && canonical != path)
    for (unsigned long inode : unix_listeners(*table, canonical.string())) inodes.push_back(inode);
  if (inodes.empty()) return std::nullopt;
  std::vector<std::string> wanted;
  for (unsigned long inode : inodes) wanted.push_back("socket:[" + std::to_string(inode) + "]");
  // Processes come and go while their directories are read: one that went is passed over.
  for (auto p = fs::directory_iterator(proc, ec); !ec && p != fs::directory_iterator(); p.increment(ec)) {
    const std::string name = p->path().filename().string();
    if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::optional<std::string> c = read_below(proc, fs::path(name) / "comm", 64);
    if (!c || c->substr(0, c->find('\n')) != comm) continue;
    std::error_code fec;
    for (auto fd = fs::directory_iterator(p->path() / "fd", fec); !fec && fd != fs::directory_iterator();
         fd.increment(fec)) {
      std::error_code lec;
      const std::string target = fs::read_symlink(fd->path(), lec).string();
      for (const std::string& w : wanted)
        if (target == w) return std::stoi(name);
    }
  }
  return std::nullopt;
}

OrWhy<TaskLayout> docker_layout(const std::string& docker_host, const fs::path& proc) {
  using Layout = OrWhy<TaskLayout>;
  std::string socket = kDefaultDockerSocket;
  if (!docker_host.empty()) {
    if (docker_host.rfind("unix://", 0) != 0) {
      return Layout::none("DOCKER_HOST " + docker_host.substr(0, 120) + " is not a unix socket of this host");
    }
    socket = docker_host.substr(7);
  }
  const std::optional<int> dockerd = socket_server(proc, socket, "dockerd");
  if (!dockerd) {
    return Layout::none("no dockerd process serves " + socket);
  }
  const std::vector<std::string> argv = process_argv(proc, *dockerd);
  const fs::path config =
      process_path(proc, *dockerd, flag_value(argv, "config-file").value_or("/etc/docker/daemon.json"));
  const auto setting = [&](const char* name) {
    std::optional<std::string> v = flag_value(argv, name);
    return v ? v : json_string(config, name);
  };
  const fs::path exec_root = process_path(proc, *dockerd, setting("exec-root").value_or(kDefaultExecRoot));
  const std::string ns = setting("containerd-namespace").value_or("moby");
  std::vector<fs::path> candidates;
  if (const auto address = setting("containerd"))
    candidates.push_back(process_path(proc, *dockerd, *address));
  else
    candidates = {exec_root / "containerd" / "containerd.sock", kSystemContainerdSocket};
  std::optional<int> containerd;
  for (const fs::path& address : candidates)
    if ((containerd = socket_server(proc, address, "containerd"))) break;
  if (!containerd) {
    return Layout::none("no containerd process serves dockerd (pid " + std::to_string(*dockerd) + ") at " +
                        candidates[0].string() + (candidates.size() > 1 ? " or " + candidates[1].string() : ""));
  }
  const OrWhy<fs::path> state = containerd_state(proc, *containerd);
  if (!state) return Layout::none(state.why);
  TaskLayout layout = containerd_layout(*state, {ns});
  layout.engine = "docker";
  std::error_code ec;
  if (!fs::is_directory(layout.root, ec)) {
    return Layout::none("dockerd's containerd (pid " + std::to_string(*containerd) + ") has no " +
                        layout.root.string());
  }
  return layout;
}

TaskLayout podman_layout_at(const fs::path& run_root, const std::string& driver) {
  TaskLayout layout(run_root / (driver + "-containers"));
  layout.engine = "podman";
  layout.namespaced = false;
  layout.pid_path = {"userdata", "pidfile"};
  layout.gone_on_exit = true;
  layout.is_id = is_hex_id;
  return layout;
}

OrWhy<TaskLayout> podman_layout() {
  using Layout = OrWhy<TaskLayout>;
  try {
    const Captured r = run_capture({"podman", "info", "--format", "{{json .Store}}"});
    if (r.exit_code != 0) {
      return Layout::none("podman info failed: " + r.err.substr(0, r.err.find('\n')).substr(0, 200));
    }
    const nlohmann::json store = nlohmann::json::parse(r.out);
    const std::string run_root = store.value("runRoot", "");
    const std::string driver = store.value("graphDriverName", "");
    if (run_root.empty() || driver.empty() || driver.find('/') != std::string::npos) {
      return Layout::none("podman info names no store run root and driver");
    }
    TaskLayout layout = podman_layout_at(run_root, driver);
    std::error_code ec;
    if (!fs::is_directory(layout.root, ec)) {
      return Layout::none("podman's run root has no " + layout.root.string());
    }
    return layout;
  } catch (const std::exception& e) {
    return Layout::none(std::string("podman info: ") + e.what());
  }
}

std::map<std::string, std::string> engine_spec_annotations(const ContainerInfo& c) {
  if (!c.running || c.id.empty()) return {};
  std::optional<TaskLayout> layout;
  try {
    if (c.engine == "docker")
      layout = docker_layout(process_env("DOCKER_HOST").value_or("")).value;
    else if (c.engine == "podman")
      layout = podman_layout().value;
  } catch (const Error&) {
    return {};
  }
  if (!layout) return {};
  const std::string ns = layout->namespaced && !layout->namespaces.empty() ? *layout->namespaces.begin() : "";
  return bundle_annotations(task_bundle(*layout, TaskEvent{true, ns, c.id, c.pid}));
}

}  // namespace gpurun
