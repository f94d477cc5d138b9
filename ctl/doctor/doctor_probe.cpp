#include "ctl/doctor/doctor_probe.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/process.hpp"
#include "base/units.hpp"
#include "ctl/configure/chain.hpp"
#include "ctl/configure/configure_containerd.hpp"
#include "ctl/configure/configure_docker.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "guard/engine_layout.hpp"
#include "oci/container.hpp"
#include "oci/host.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {
namespace {

// The kernel's default kernel.shmmax and kernel.shmall since Linux 3.16: ULONG_MAX - 2^24.
constexpr const char* kShmSysctlDefault = "18446744073692774399";
// /proc/self/ns/{ipc,pid} of the initial namespaces (PROC_IPC_INIT_INO, PROC_PID_INIT_INO): the
// host's.
constexpr const char* kHostPidNamespace = "pid:[4026531836]";
// A /dev/shm with more entries than this is listed partly (the totals say so).
constexpr std::size_t kMaxListed = 100000;

// kernel.shmmax / kernel.shmall of this process's IPC namespace, when not the kernel default.
void local_sysctls(DoctorFacts& f) {
  for (const char* key : {"shmmax", "shmall"}) {
    const OrWhy<std::string> v = read_kernel_file(std::string("/proc/sys/kernel/") + key);
    if (v && *v != kShmSysctlDefault) f.sysctls[std::string("kernel.") + key] = *v;
  }
}

// An engine's stderr on one line.
std::string shown_error(std::string why) {
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  for (char& c : why)
    if (c == '\n') c = ' ';
  return why;
}

std::string cpus_text(unsigned affinity, std::optional<double> quota) {
  std::ostringstream s;
  s << "affinity " << affinity;
  if (quota) s << ", CPU quota " << *quota;
  return s.str();
}

bool in_namespace(const char* link, const char* value) {
  std::error_code ec;
  const fs::path ns = fs::read_symlink(link, ec);
  return !ec && ns.string() == value;
}

}  // namespace

std::vector<ShmFile> list_shm_files(int dirfd, const std::string& what) {
  std::vector<ShmFile> files;
  int copy = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw system_error("list " + what, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(copy), ::closedir);
  if (!dir) {
    int err = errno;
    ::close(copy);
    throw system_error("list " + what, err);
  }
  while (struct dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (files.size() >= kMaxListed) break;
    struct stat st {};
    ShmFile file{name, 0};
    if (::fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      file.bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
    files.push_back(file);
  }
  std::sort(files.begin(), files.end(), [](const ShmFile& a, const ShmFile& b) { return a.name < b.name; });
  return files;
}

std::optional<dev_t> measure_shm(int rootfd, const std::string& where, DoctorFacts& f) {
  const std::string what = where + "/dev/shm";
  const ShmProbe p = probe_shm_dir(rootfd, Resolve::kSymlinksInRoot, what);
  if (p.error) {
    f.shm_mount = ShmMount::kMissing;
    return std::nullopt;
  }
  f.shm_mount = p.mount;
  f.shm_size = p.fs.size();
  f.shm_used = p.fs.used();
  f.files = list_shm_files(p.dir.get(), what);
  return p.fs.st.st_dev;
}

std::optional<double> inspect_cpu_quota(const nlohmann::json& host) {
  auto number = [&](const char* key) -> std::int64_t {
    return host.contains(key) && host[key].is_number_integer() ? host[key].get<std::int64_t>() : 0;
  };
  if (const std::int64_t nano = number("NanoCpus"); nano > 0) return static_cast<double>(nano) / 1e9;
  const std::int64_t quota = number("CpuQuota"), period = number("CpuPeriod");
  if (quota > 0) return static_cast<double>(quota) / static_cast<double>(period > 0 ? period : 100000);
  return std::nullopt;
}

std::optional<unsigned> status_cpus_allowed(const std::string& status) {
  const std::string key = "Cpus_allowed_list:";
  for (std::size_t begin = 0; begin < status.size();) {
    std::size_t end = status.find('\n', begin);
    if (end == std::string::npos) end = status.size();
    if (status.compare(begin, key.size(), key) == 0) {
      std::string list = status.substr(begin + key.size(), end - begin - key.size());
      list.erase(0, list.find_first_not_of(" \t"));
      return parse_cpu_list(list);
    }
    begin = end + 1;
  }
  return std::nullopt;
}

void gather_inside(DoctorFacts& f) {
  const bool host_ipc = in_host_ipc_namespace("self", "this process");
  const bool host_pid = in_namespace("/proc/self/ns/pid", kHostPidNamespace);
  char hostname[256] = {};
  (void)::gethostname(hostname, sizeof hostname - 1);
  f.on_host = host_ipc && host_pid;
  f.target = f.on_host ? "this machine (not in a container: the host's PID and IPC namespaces)" : "this container";
  if (hostname[0]) f.target += std::string(" (hostname ") + hostname + ")";
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw system_error("open /", errno);
  measure_shm(root.get(), "", f);
  if (host_ipc) f.ipc = IpcMode{IpcKind::kHost, "", ""};
  // probe_host reads the limits at the cgroup mount's root when /proc/self/cgroup names a
  // path the container cannot see (cgroup v1 without a cgroup namespace).
  const HostInfo h = probe_host();
  f.memory_limit = h.cgroup_memory_limit;
  f.cpus = h.cpus;
  f.cpus_source = cpus_text(h.affinity_cpus, h.cgroup_cpu_quota);
  for (const std::string& name : contract_env_names())
    if (const char* v = std::getenv(name.c_str())) f.env[name] = v;
  local_sysctls(f);
}

namespace {

// The canonical path of the program `name` (a path, or a name on PATH); "" when none.
std::string resolved_binary(const std::string& name) {
  if (name.empty()) return "";
  const std::optional<fs::path> found = find_executable(name);
  if (!found) return "";
  std::error_code ec;
  const fs::path canonical = fs::canonical(*found, ec);
  return ec ? found->string() : canonical.string();
}

// The entries of one engine's file, classified and resolved.
void add_runtime_entries(DoctorFacts& f, const std::string& engine, const std::string& file,
                         const std::vector<NamedRuntime>& named, const std::vector<std::string>& runtimes) {
  for (const NamedRuntime& r : named) {
    RuntimeEntryFacts e;
    e.file = file;
    e.engine = engine;
    e.name = r.name;
    const std::string binary = r.binary.empty() ? "" : resolved_binary(r.binary);
    const std::optional<fs::path> chained = binary.empty() ? std::nullopt : chain_of_binary(binary);
    e.gpu_run = chained || fs::path(r.binary).filename() == "gpu-run-runtime";
    if (chained) {
      e.execs = resolved_binary(chained->string());
      e.execs_how = "its chain file " + binary + " (runtime=" + chained->string() + ")";
    } else if (e.gpu_run) {
      for (const std::string& c : runtimes) {
        e.execs = resolved_binary(c);
        if (!e.execs.empty()) break;
      }
      std::string list;
      for (const std::string& c : runtimes) list += (list.empty() ? "" : ", ") + c;
      e.execs_how = "the gpu-run config's runtimes (" + list + ")";
    } else {
      e.binary = binary;
      e.gpu = fs::path(r.binary).filename().string().rfind("nvidia-container-runtime", 0) == 0;
    }
    f.runtime_entries.push_back(e);
  }
}

}  // namespace

void gather_runtime_entries(DoctorFacts& f, const std::string& daemon_json, const std::string& containerd_config,
                            const std::vector<std::string>& runtimes) {
  // A file doctor cannot read as its engine would is not this check's business: configure
  // and the engine itself say what is wrong with it.
  try {
    add_runtime_entries(f, "docker", daemon_json,
                        daemon_json_runtimes(read_existing_file(daemon_json, "daemon.json"), daemon_json), runtimes);
  } catch (const Error&) {
  }
  try {
    // What containerd makes of config.toml and its imports (gpu-run's drop-in included).
    const ContainerdSources sources = read_containerd_sources(containerd_config, kDefaultRuntimeHandler);
    add_runtime_entries(f, "containerd", containerd_config, containerd_effective_runtimes(sources), runtimes);
    for (const ContainerdSource& s : sources.files)
      if (s.dropin && s.text) f.containerd_dropin = s.path;
    f.containerd_dropin_stale = containerd_dropin_stale(sources, kDefaultRuntimeHandler);
  } catch (const Error&) {
  }
}

InspectedContainer inspect_for_doctor(const std::string& engine, const std::string& name) {
  Captured r = run_capture({engine, "inspect", "--type", "container", name});
  if (r.exit_code != 0) {
    const std::string why = shown_error(r.err);
    throw usage_error("container '" + name + "': " + engine + " inspect failed" + (why.empty() ? "" : ": " + why) +
                      " (is the name right? wrong --engine?)");
  }
  InspectedContainer out;
  out.engine = engine;
  out.name = name;
  out.info = parse_inspect(r.out, engine);
  // gpu-run-runtime's record is an annotation of the spec, not a label: read where the guard reads it.
  for (auto& [key, value] : engine_spec_annotations(out.info)) out.info.annotations[key] = std::move(value);
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  if (doc.is_array() && !doc.empty()) doc = doc[0];
  out.host_config = doc.is_object() && doc.contains("HostConfig") && doc["HostConfig"].is_object()
                        ? doc["HostConfig"]
                        : nlohmann::json::object();
  const ContainerInfo& c = out.info;
  out.target = "container " + (c.name.empty() ? name : c.name) + " (" + c.id.substr(0, 12) + ", " + engine + ")";
  return out;
}

bool has_exited(const InspectedContainer& container) {
  return !container.info.running && container.info.exit_code.has_value();
}

namespace {

// A container sized before the decision record: what its GPU_RUN_* environment says.
template <typename Env>
void gather_crash_env(const Env& env, CrashFacts& crash) {
  crash.profile = env(kEnvProfile);
  crash.gpus = env(kEnvGpus);
  crash.workers = env(request_key(RequestKey::kWorkers).env);
  if (!crash.workers) crash.workers = env(kEnvNumWorkers);
  crash.batch_size = env(kEnvBatchSize);
  if (const auto size = env(kEnvShmSize)) {
    try {
      crash.planned_shm = parse_size(*size, kEnvShmSize);
    } catch (const Error&) {
      // Not a size gpu-run wrote: the container asked for it itself (a request, not a plan).
    }
  }
}

}  // namespace

CrashFacts gather_crash(const InspectedContainer& container) {
  const ContainerInfo& c = container.info;
  CrashFacts crash;
  crash.source = container.target + ", exited with status " + std::to_string(c.exit_code.value_or(-1)) +
                 (c.oom_killed ? ", OOM-killed" : "");
  crash.exit_code = c.exit_code;
  if (c.engine == "docker" || c.engine == "podman") crash.oom_killed = c.oom_killed;
  crash.shm_size = c.shm_size;
  const auto env = [&](const char* name) -> std::optional<std::string> {
    const auto it = c.env.find(name);
    if (it == c.env.end()) return std::nullopt;
    return it->second.substr(0, 80);
  };
  // What gpu-run decided: its record, else the old keys in the environment.
  if (const Recorded recorded = read_recorded(c); recorded.record) {
    const DecisionRecord& r = *recorded.record;
    if (!r.profile.empty()) crash.profile = r.profile;
    if (r.gpus) crash.gpus = std::to_string(r.gpus);
    if (r.workers) crash.workers = std::to_string(r.workers);
    if (r.batch_size) crash.batch_size = std::to_string(r.batch_size);
    crash.planned_shm = r.size;
    crash.door_name = r.door;
    if (!r.command_flag.empty()) {
      crash.command_flag = r.command_flag;
      crash.command_workers = r.command_workers;
    }
  } else {
    gather_crash_env(env, crash);
  }
  // The engine replays the container's stdout and stderr on its own two streams.
  const Captured logs = run_capture({container.engine, "logs", "--tail", "500", container.name});
  if (logs.exit_code != 0)
    throw Error(container.engine + " logs " + container.name + " failed: " + shown_error(logs.err), 0, kExitFailure);
  read_crash_log(logs.out, crash);
  read_crash_log(logs.err, crash);
  return crash;
}

void gather_from_host(const InspectedContainer& container, DoctorFacts& f) {
  const ContainerInfo& c = container.info;
  const std::string& name = container.name;
  const nlohmann::json& host = container.host_config;
  f.from_host = true;
  f.engine = container.engine;
  f.target = container.target;
  if (!c.running || c.pid <= 0)
    throw usage_error("container '" + name +
                      "' is not running: doctor reads its /dev/shm through its process (start "
                      "it, or run gpu-run-ctl doctor inside it)");
  f.ipc = c.ipc;
  if (host.is_object() && host.contains("Runtime") && host["Runtime"].is_string()) f.runtime = host["Runtime"];
  // The IPC namespace itself settles --ipc=host (podman 4 reports it as "shareable").
  try {
    if (in_host_ipc_namespace(std::to_string(c.pid), "container '" + name + "'"))
      f.ipc = IpcMode{IpcKind::kHost, "", ""};
  } catch (const Error&) {
    // Not readable (not root, another PID namespace): the engine's ipc mode stands.
  }
  f.memory_limit = c.memory_limit;
  f.host_memory = probe_host().mem_total;
  for (const std::string& env_name : contract_env_names())
    if (const auto it = c.env.find(env_name); it != c.env.end()) f.env[env_name] = it->second;
  f.recorded = read_recorded(c);

  const std::string proc = "/proc/" + std::to_string(c.pid);
  UniqueFd root(::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root)
    throw system_error("open " + proc + "/root of container '" + name +
                           "' (run doctor as root on the container's host, in the host's PID namespace)",
                       errno);
  const auto shm_dev = measure_shm(root.get(), proc + "/root", f);
  const auto host_dev = host_shm_device();
  if (shm_dev && host_dev) f.shm_is_host = *shm_dev == *host_dev;

  // CPUs: the container's process's affinity (its cpuset) bounded by the engine's quota.
  unsigned affinity = probe_host().affinity_cpus;
  if (const OrWhy<std::string> status = read_kernel_file(proc + "/status"))
    if (const auto n = status_cpus_allowed(*status)) affinity = *n;
  const auto quota = inspect_cpu_quota(host);
  f.cpus = usable_cpus(affinity, quota);
  f.cpus_source = cpus_text(affinity, quota);

  // kernel.shm* are per IPC namespace: --sysctl for the container's own, the host's with
  // --ipc=host.
  if (f.ipc && f.ipc->kind == IpcKind::kHost) {
    local_sysctls(f);
  } else if (host.contains("Sysctls") && host["Sysctls"].is_object()) {
    for (const auto& [key, value] : host["Sysctls"].items())
      if ((key == "kernel.shmmax" || key == "kernel.shmall") && value.is_string() &&
          value.get<std::string>() != kShmSysctlDefault)
        f.sysctls[key] = value.get<std::string>();
  }
}

}  // namespace gpurun
