#include "doctor.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config.hpp"
#include "container.hpp"
#include "contract.hpp"
#include "ctl_common.hpp"
#include "error.hpp"
#include "fd.hpp"
#include "host.hpp"
#include "process.hpp"
#include "shm_mount.hpp"
#include "sizing.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

// Docker's default /dev/shm, and podman's (65536000 bytes: "64000k" in podman 4).
constexpr std::uint64_t kDockerDefaultShm = 64 * kMiB;
constexpr std::uint64_t kPodmanDefaultShm = 64000 * kKiB;
constexpr unsigned kUseWarnPercent = 80;
constexpr unsigned kUseFailPercent = 95;
// The kernel's default kernel.shmmax and kernel.shmall since Linux 3.16: ULONG_MAX - 2^24.
constexpr const char* kShmSysctlDefault = "18446744073692774399";
// /proc/self/ns/{ipc,pid} of the initial namespaces (PROC_IPC_INIT_INO, PROC_PID_INIT_INO): the
// host's.
constexpr const char* kHostIpcNamespace = "ipc:[4026531839]";
constexpr const char* kHostPidNamespace = "pid:[4026531836]";
// A /dev/shm with more entries than this is listed partly (the totals say so).
constexpr std::size_t kMaxListed = 100000;
constexpr std::size_t kNamesShown = 5;

const char* const kSizeFix =
    "restart the container sized for the job: gpu-run --profile NAME [--gpus N] IMAGE ... "
    "(`gpu-run-ctl plan` shows the size) or --shm-size SIZE; in Kubernetes an emptyDir of medium "
    "Memory at /dev/shm (`gpu-run-ctl k8s`). Raising kernel.shmmax or kernel.shmall does not help: "
    "they limit System V shmget segments, not /dev/shm";

unsigned percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return 0;
  return static_cast<unsigned>((static_cast<long double>(part) * 100) / static_cast<long double>(whole));
}

std::optional<std::string> env_of(const DoctorFacts& f, const std::string& name) {
  auto it = f.env.find(name);
  if (it == f.env.end()) return std::nullopt;
  return it->second;
}

// "GPU_RUN_SHM_SIZE=2g"
std::string assignment(const char* name, const std::string& value) { return std::string(name) + "=" + value; }

bool host_shm(const DoctorFacts& f) { return f.ipc_mode == "host" || f.shm_is_host.value_or(false); }

bool has_shm(const DoctorFacts& f) { return f.shm_mount == ShmMount::kTmpfs || f.shm_mount == ShmMount::kNotTmpfs; }

// "torch_1_2 (1MiB), torch_3_4 (2MiB) and 3 more"
std::string list_files(const std::vector<ShmFile>& files) {
  std::string out;
  for (std::size_t i = 0; i < files.size() && i < kNamesShown; ++i) {
    if (i) out += ", ";
    out += files[i].name + " (" + format_size(files[i].bytes) + ")";
  }
  if (files.size() > kNamesShown) out += " and " + std::to_string(files.size() - kNamesShown) + " more";
  return out;
}

std::uint64_t total_bytes(const std::vector<ShmFile>& files) {
  std::uint64_t sum = 0;
  for (const auto& f : files) sum += f.bytes;
  return sum;
}

void add(std::vector<Finding>& out, Level level, const char* check, std::string message, std::string fix = "") {
  out.push_back(Finding{level, check, std::move(message), std::move(fix)});
}

void check_mount(const DoctorFacts& f, std::vector<Finding>& out) {
  const std::string why = f.ipc_mode == "none" ? " (ipc mode none)" : "";
  const std::string fix =
      "restart it without --ipc=none, sized for the job: gpu-run --profile NAME IMAGE ... (or "
      "--shm-size SIZE)";
  switch (f.shm_mount) {
    case ShmMount::kMissing:
      add(out, Level::kFail, "shm-mount",
          "there is no /dev/shm" + why + ": DataLoader workers and NCCL cannot share memory", fix);
      break;
    case ShmMount::kNotMount:
      add(out, Level::kFail, "shm-mount",
          "/dev/shm is a plain directory of /dev, not a tmpfs of its own" + why + ": it has only /dev's " +
              format_size(f.shm_size),
          fix);
      break;
    case ShmMount::kNotTmpfs:
      add(out, Level::kWarn, "shm-mount",
          "/dev/shm is a mount but not a tmpfs (a disk directory bound in?): shared tensors go to "
          "that filesystem",
          "drop the bind mount on /dev/shm and size a tmpfs for the job: gpu-run --profile NAME "
          "IMAGE ...");
      break;
    case ShmMount::kTmpfs:
      break;
  }
}

void check_ipc(const DoctorFacts& f, std::vector<Finding>& out) {
  const std::string& mode = f.ipc_mode;
  if (mode == "host") {
    add(out, Level::kWarn, "ipc",
        std::string(f.from_host ? "ipc mode host"
                                : "this process is in the host's IPC namespace (--ipc=host, or not "
                                  "in a container)") +
            ": /dev/shm is the host's, shared with every process there; gpu-run's sizing does not "
            "apply and "
            "segments are visible across containers",
        "start the container without --ipc=host: gpu-run --profile NAME IMAGE ... gives it a "
        "private /dev/shm "
        "of the planned size");
    return;
  }
  if (f.shm_is_host.value_or(false)) {
    add(out, Level::kWarn, "ipc",
        "/dev/shm is the host's (the same device as the host's /dev/shm: -v /dev/shm:/dev/shm, or "
        "--ipc=host): "
        "shared with every process there; gpu-run's sizing does not apply",
        "remove the /dev/shm bind mount (or --ipc=host) and start it with gpu-run --profile NAME "
        "IMAGE ...");
    return;
  }
  if (mode == "none") return;  // check_mount reports the missing /dev/shm
  if (mode.rfind("container:", 0) == 0) {
    add(out, Level::kOk, "ipc",
        "shares " + mode.substr(10) + "'s IPC namespace and /dev/shm: that container's size is what counts");
  } else if (mode.empty()) {
    add(out, Level::kOk, "ipc",
        f.from_host ? "ipc mode not reported by " + f.engine + "; /dev/shm is not the host's"
                    : "own IPC namespace (private, shareable or another container's): /dev/shm is "
                      "not the host's");
  } else {
    add(out, Level::kOk, "ipc", "ipc mode " + mode + ": a /dev/shm of its own, not the host's");
  }
}

void check_size(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  const std::string size = format_size(f.shm_size);
  const std::string kind = f.shm_mount == ShmMount::kTmpfs ? "tmpfs" : "not a tmpfs";
  const std::string dies = ": a DataLoader with workers dies with \"bus error\" once its batches in flight pass it";
  if (f.shm_size == kDockerDefaultShm) {
    add(out, Level::kFail, "shm-size", "/dev/shm is 64MiB, Docker's default for every container" + dies, kSizeFix);
  } else if (f.shm_size == kPodmanDefaultShm) {
    add(out, Level::kFail, "shm-size", "/dev/shm is 62.5MiB (64000KiB), podman's default for every container" + dies,
        kSizeFix);
  } else if (f.shm_size < kDockerDefaultShm) {
    add(out, Level::kFail, "shm-size", "/dev/shm is " + size + ", at or below the engines' defaults" + dies, kSizeFix);
  } else {
    add(out, Level::kOk, "shm-size",
        "/dev/shm is " + size + " (" + kind + (host_shm(f) ? ", the host's" : "") +
            "), above the engines' 64MiB default");
  }
}

void check_sizing(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  const auto asked = env_of(f, kEnvShmSize);
  const auto profile = env_of(f, kEnvProfile);
  const std::string how =
      "the container did not start through gpu-run, gpu-run-runtime (docker run --runtime gpu-run) "
      "or "
      "gpu-run-hook, or the engine replaced the size";
  if (asked) {
    std::uint64_t bytes = 0;
    try {
      bytes = parse_size(*asked, kEnvShmSize);
    } catch (const Error& e) {
      add(out, Level::kWarn, "sizing", assignment(kEnvShmSize, *asked) + " is not a size: " + e.what(),
          "set it to a size such as 2g, or let gpu-run set it (gpu-run --profile NAME)");
      return;
    }
    if (host_shm(f)) {
      add(out, f.shm_size >= bytes ? Level::kOk : Level::kFail, "sizing",
          assignment(kEnvShmSize, *asked) + " asks for " + format_size(bytes) + "; the host's /dev/shm is " +
              format_size(f.shm_size) + " and gpu-run never resizes it",
          f.shm_size >= bytes ? "" : "start it without --ipc=host or the /dev/shm bind, with gpu-run --profile NAME");
    } else if (f.shm_size >= bytes) {
      add(out, Level::kOk, "sizing",
          assignment(kEnvShmSize, *asked) + " asked for " + format_size(bytes) + " and /dev/shm has " +
              format_size(f.shm_size) + ": the size was applied");
    } else {
      add(out, Level::kFail, "sizing",
          assignment(kEnvShmSize, *asked) + " asked for " + format_size(bytes) + " but /dev/shm has " +
              format_size(f.shm_size) + ": " + how,
          "start it with gpu-run (which passes --shm-size), or register gpu-run-runtime "
          "(gpu-run-ctl configure "
          "docker) or the hook (gpu-run-ctl configure podman) and start it through them");
    }
    return;
  }
  if (profile) {
    if (f.shm_size <= kDockerDefaultShm && !host_shm(f)) {
      add(out, Level::kFail, "sizing",
          assignment(kEnvProfile, *profile) + " asks gpu-run's runtime or hook to size /dev/shm, but it still has " +
              format_size(f.shm_size) + ": " + how,
          "start it with docker run --runtime gpu-run (after gpu-run-ctl configure docker), through the podman "
          "hook (gpu-run-ctl configure podman, with --annotation " +
              assignment(request_key(RequestKey::kProfile).annotation, "NAME") + "), or with gpu-run");
    } else {
      add(out, Level::kOk, "sizing",
          assignment(kEnvProfile, *profile) + " and /dev/shm has " + format_size(f.shm_size));
    }
  }
}

void check_use(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f) || f.shm_size == 0) return;
  const unsigned pct = percent(f.shm_used, f.shm_size);
  const std::string numbers =
      format_size(f.shm_used) + " of " + format_size(f.shm_size) + " used (" + std::to_string(pct) + "%)";
  const std::string fix =
      "a larger /dev/shm for the job (gpu-run --profile NAME with its real batch size and workers; "
      "`gpu-run-ctl plan` shows the need), fewer DataLoader workers or a smaller batch; remove "
      "leftover segments";
  if (pct >= kUseFailPercent) {
    add(out, Level::kFail, "shm-use",
        numbers + ": the next batch a worker writes there dies with SIGBUS (\"bus error\"), not ENOSPC", fix);
  } else if (pct > kUseWarnPercent) {
    add(out, Level::kWarn, "shm-use", numbers + ": little room left for batches in flight", fix);
  } else {
    add(out, Level::kOk, "shm-use", numbers);
  }
}

void check_memory(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  if (!f.memory_limit) {
    add(out, Level::kOk, "memory", "no memory limit: /dev/shm pages count against the host's memory like any other");
    return;
  }
  const MemoryBudget budget{*f.memory_limit, f.memory_fraction_max};
  const std::string shm = format_size(f.shm_size), lim = format_size(budget.limit);
  const std::string share = std::to_string(percent(f.shm_size, budget.limit)) + "% of the memory limit " + lim;
  const std::string fix = "raise the memory limit to at least " + engine_size(budget.limit_for(f.shm_size)) +
                          " (--memory), or size /dev/shm for the job instead of generously (gpu-run --profile NAME)";
  if (f.shm_size > budget.limit) {
    add(out, Level::kWarn, "memory",
        "/dev/shm " + shm + " is larger than the memory limit " + lim +
            ": tmpfs pages count against the limit, so filling /dev/shm gets the container OOM-killed instead of a "
            "bus error",
        fix);
  } else if (!budget.holds(f.shm_size)) {
    add(out, Level::kWarn, "memory",
        "/dev/shm " + shm + " is " + share + " (more than memory_fraction_max " + budget.percent() +
            "): tmpfs pages count against it, so a full /dev/shm leaves the job little memory (OOM kill)",
        fix);
  } else {
    add(out, Level::kOk, "memory", "/dev/shm " + shm + " is " + share + " (at most " + budget.percent() + " allowed)");
  }
}

void check_workers(const DoctorFacts& f, std::vector<Finding>& out) {
  const std::string cpus = f.cpus ? std::to_string(*f.cpus) + " CPU" + (*f.cpus == 1 ? "" : "s") +
                                        (f.cpus_source.empty() ? "" : " (" + f.cpus_source + ")")
                                  : std::string("an unknown number of CPUs");
  const auto workers = env_of(f, kEnvNumWorkers);
  if (!workers) {
    add(out, Level::kOk, "workers",
        "the container may use " + cpus + "; " + kEnvNumWorkers + " is not set (not started by gpu-run)");
    return;
  }
  std::uint64_t n = 0;
  try {
    n = parse_count(*workers, kEnvNumWorkers);
  } catch (const Error&) {
    add(out, Level::kWarn, "workers", assignment(kEnvNumWorkers, *workers) + " is not a number",
        "let gpu-run set it (gpu-run --profile NAME), or set a whole number");
    return;
  }
  if (f.cpus && n > *f.cpus) {
    add(out, Level::kWarn, "workers",
        assignment(kEnvNumWorkers, *workers) + " DataLoader workers per GPU rank, but the container may use " + cpus +
            ": the workers compete for CPUs and each holds batches in /dev/shm",
        "start it with gpu-run without --workers (workers_per_gpu \"auto\" follows the CPUs), or "
        "give it more "
        "CPUs (--cpus, --cpuset-cpus)");
  } else {
    add(out, Level::kOk, "workers",
        assignment(kEnvNumWorkers, *workers) + " DataLoader workers per GPU rank; the container may use " + cpus);
  }
}

void check_segments(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  std::vector<ShmFile> torch, nccl;
  for (const auto& file : f.files) {
    if (is_torch_segment(file.name)) torch.push_back(file);
    if (is_nccl_segment(file.name)) nccl.push_back(file);
  }
  if (torch.empty()) {
    add(out, Level::kOk, "torch-leftovers", "no torch_* segments in /dev/shm");
  } else {
    add(out, Level::kWarn, "torch-leftovers",
        std::to_string(torch.size()) + " torch_* segment" + (torch.size() == 1 ? "" : "s") + " holding " +
            format_size(total_bytes(torch)) + " of /dev/shm: " + list_files(torch) +
            ". PyTorch's file_system sharing strategy leaves these behind when workers are killed "
            "(the default file_descriptor strategy unlinks its segments at once)",
        "when no training job runs in the container: rm /dev/shm/torch_*; keep "
        "torch.multiprocessing's default "
        "file_descriptor strategy instead of set_sharing_strategy('file_system')");
  }
  if (nccl.empty()) {
    add(out, Level::kOk, "nccl", "no NCCL segments (nccl-*) in /dev/shm");
  } else {
    add(out, Level::kOk, "nccl",
        std::to_string(nccl.size()) + " NCCL segment" + (nccl.size() == 1 ? "" : "s") + " (" +
            format_size(total_bytes(nccl)) + "): " + list_files(nccl) +
            ". NCCL's shared-memory transport between ranks uses them; with no job running they "
            "are leftovers "
            "of a killed one");
  }
}

void check_sysctls(const DoctorFacts& f, std::vector<Finding>& out) {
  if (f.sysctls.empty()) return;
  std::string set;
  for (const auto& [key, value] : f.sysctls) set += (set.empty() ? "" : ", ") + key + "=" + value;
  add(out, Level::kOk, "shmmax",
      set +
          " (not the kernel's default): these limit System V shmget segments only; PyTorch and "
          "NCCL use "
          "/dev/shm, whose size they do not change",
      "nothing to gain from them for PyTorch: size /dev/shm instead (gpu-run --profile NAME)");
}

// ---------------------------------------------------------------------------------------
// Measuring

// The entries of the directory `fd` (not recursive), with the space each occupies.
std::vector<ShmFile> list_dir(int fd, const std::string& what) {
  std::vector<ShmFile> files;
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
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
    if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      file.bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
    files.push_back(file);
  }
  std::sort(files.begin(), files.end(), [](const ShmFile& a, const ShmFile& b) { return a.name < b.name; });
  return files;
}

// Fills the /dev/shm facts of the tree whose root is `rootfd`. Returns /dev/shm's device.
std::optional<dev_t> measure_shm(int rootfd, const std::string& where, DoctorFacts& f) {
  const std::string what = where + "/dev/shm";
  UniqueFd shm(open_dir_in_root(rootfd, "dev/shm", Resolve::kSymlinksInRoot));
  if (!shm) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      f.shm_mount = ShmMount::kMissing;
      return std::nullopt;
    }
    throw system_error("open " + what, err);
  }
  const FsStat shm_fs = stat_fs(shm.get(), what);
  std::optional<dev_t> dev_device;
  struct stat dev_st {};
  UniqueFd dev(open_dir_in_root(rootfd, "dev", Resolve::kSymlinksInRoot));
  if (dev && ::fstat(dev.get(), &dev_st) == 0) dev_device = dev_st.st_dev;
  f.shm_mount = classify_shm(shm_fs, dev_device);
  f.shm_size = shm_fs.size();
  f.shm_used = shm_fs.used();
  f.files = list_dir(shm.get(), what);
  return shm_fs.st.st_dev;
}

// kernel.shmmax / kernel.shmall of this process's IPC namespace, when not the kernel default.
void local_sysctls(DoctorFacts& f) {
  for (const char* key : {"shmmax", "shmall"}) {
    const auto v = read_kernel_file(std::string("/proc/sys/kernel/") + key);
    if (v && *v != kShmSysctlDefault) f.sysctls[std::string("kernel.") + key] = *v;
  }
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

void gather_inside(DoctorFacts& f) {
  const bool host_ipc = in_namespace("/proc/self/ns/ipc", kHostIpcNamespace);
  const bool host_pid = in_namespace("/proc/self/ns/pid", kHostPidNamespace);
  char hostname[256] = {};
  (void)::gethostname(hostname, sizeof hostname - 1);
  f.target =
      host_ipc && host_pid ? "this machine (not in a container: the host's PID and IPC namespaces)" : "this container";
  if (hostname[0]) f.target += std::string(" (hostname ") + hostname + ")";
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw system_error("open /", errno);
  measure_shm(root.get(), "", f);
  if (host_ipc) f.ipc_mode = "host";
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

// The CPU quota inspect reports: --cpus (NanoCpus) or --cpu-quota/--cpu-period.
std::optional<double> inspect_cpu_quota(const nlohmann::json& host) {
  auto number = [&](const char* key) -> std::int64_t {
    return host.contains(key) && host[key].is_number_integer() ? host[key].get<std::int64_t>() : 0;
  };
  if (const std::int64_t nano = number("NanoCpus"); nano > 0) return static_cast<double>(nano) / 1e9;
  const std::int64_t quota = number("CpuQuota"), period = number("CpuPeriod");
  if (quota > 0) return static_cast<double>(quota) / static_cast<double>(period > 0 ? period : 100000);
  return std::nullopt;
}

// The number of CPUs in the "Cpus_allowed_list:" line of /proc/PID/status text.
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

void gather_from_host(const std::string& engine, const std::string& name, DoctorFacts& f) {
  Captured r = run_capture({engine, "inspect", "--type", "container", name});
  if (r.exit_code != 0) {
    std::string why = r.err;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    for (char& c : why)
      if (c == '\n') c = ' ';
    throw Error("container '" + name + "': " + engine + " inspect failed" + (why.empty() ? "" : ": " + why) +
                " (is the name right? wrong --engine?)");
  }
  const ContainerInfo c = parse_inspect(r.out, engine);
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  if (doc.is_array() && !doc.empty()) doc = doc[0];
  const nlohmann::json host = doc.is_object() && doc.contains("HostConfig") && doc["HostConfig"].is_object()
                                  ? doc["HostConfig"]
                                  : nlohmann::json::object();
  f.from_host = true;
  f.engine = engine;
  f.target = "container " + (c.name.empty() ? name : c.name) + " (" + c.id.substr(0, 12) + ", " + engine + ")";
  if (!c.running || c.pid <= 0)
    throw Error("container '" + name +
                "' is not running: doctor reads its /dev/shm through its process (start "
                "it, or run gpu-run-ctl doctor inside it)");
  f.ipc_mode = c.ipc_mode;
  // The IPC namespace itself settles --ipc=host (podman 4 reports it as "shareable").
  std::error_code ec_self, ec_container;
  const fs::path self_ns = fs::read_symlink("/proc/self/ns/ipc", ec_self);
  const fs::path container_ns = fs::read_symlink("/proc/" + std::to_string(c.pid) + "/ns/ipc", ec_container);
  if (!ec_self && !ec_container && self_ns == container_ns) f.ipc_mode = "host";
  f.memory_limit = c.memory_limit;
  for (const std::string& env_name : contract_env_names())
    if (const auto it = c.env.find(env_name); it != c.env.end()) f.env[env_name] = it->second;

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
  if (const auto status = read_kernel_file(proc + "/status"))
    if (const auto n = status_cpus_allowed(*status)) affinity = *n;
  const auto quota = inspect_cpu_quota(host);
  f.cpus = usable_cpus(affinity, quota);
  f.cpus_source = cpus_text(affinity, quota);

  // kernel.shm* are per IPC namespace: --sysctl for the container's own, the host's with
  // --ipc=host.
  if (f.ipc_mode == "host") {
    local_sysctls(f);
  } else if (host.contains("Sysctls") && host["Sysctls"].is_object()) {
    for (const auto& [key, value] : host["Sysctls"].items())
      if ((key == "kernel.shmmax" || key == "kernel.shmall") && value.is_string() &&
          value.get<std::string>() != kShmSysctlDefault)
        f.sysctls[key] = value.get<std::string>();
  }
}

}  // namespace

const char* level_name(Level level) {
  switch (level) {
    case Level::kOk:
      return "OK";
    case Level::kWarn:
      return "WARN";
    case Level::kFail:
      return "FAIL";
  }
  return "?";
}

bool is_torch_segment(const std::string& name) { return name.rfind("torch_", 0) == 0; }
bool is_nccl_segment(const std::string& name) { return name.rfind("nccl-", 0) == 0; }

std::vector<Finding> diagnose(const DoctorFacts& f) {
  std::vector<Finding> out;
  check_mount(f, out);
  check_ipc(f, out);
  check_size(f, out);
  check_sizing(f, out);
  check_use(f, out);
  check_memory(f, out);
  check_workers(f, out);
  check_segments(f, out);
  check_sysctls(f, out);
  return out;
}

Level worst_level(const std::vector<Finding>& findings) {
  Level worst = Level::kOk;
  for (const auto& x : findings) worst = std::max(worst, x.level);
  return worst;
}

int doctor_exit_code(const std::vector<Finding>& findings) {
  switch (worst_level(findings)) {
    case Level::kOk:
      return kExitOk;
    case Level::kWarn:
      return kDoctorExitWarn;
    case Level::kFail:
      return kDoctorExitFail;
  }
  return kDoctorExitFail;
}

std::string format_findings(const DoctorFacts& facts, const std::vector<Finding>& findings) {
  std::ostringstream s;
  s << "gpu-run-ctl doctor: " << facts.target << "\n";
  std::size_t width = 0;
  for (const auto& x : findings) width = std::max(width, x.check.size());
  const std::string indent(6 + width + 2, ' ');
  for (const auto& x : findings) {
    std::string level = level_name(x.level);
    s << level << std::string(6 - level.size(), ' ') << x.check << std::string(width - x.check.size() + 2, ' ')
      << x.message << "\n";
    if (!x.fix.empty() && x.level != Level::kOk) s << indent << "fix: " << x.fix << "\n";
  }
  s << "worst: " << level_name(worst_level(findings)) << "\n";
  return s.str();
}

nlohmann::json doctor_json(const DoctorFacts& f, const std::vector<Finding>& findings) {
  nlohmann::json j;
  j["target"] = f.target;
  j["worst"] = level_name(worst_level(findings));
  j["exit_code"] = doctor_exit_code(findings);
  nlohmann::json facts;
  facts["from_host"] = f.from_host;
  facts["engine"] = f.from_host ? nlohmann::json(f.engine) : nlohmann::json(nullptr);
  facts["shm_mount"] = shm_mount_name(f.shm_mount);
  facts["shm_size_bytes"] = f.shm_size;
  facts["shm_used_bytes"] = f.shm_used;
  facts["shm_is_host"] = f.shm_is_host ? nlohmann::json(*f.shm_is_host) : nlohmann::json(nullptr);
  facts["ipc_mode"] = f.ipc_mode.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.ipc_mode);
  facts["memory_limit_bytes"] = f.memory_limit ? nlohmann::json(*f.memory_limit) : nlohmann::json(nullptr);
  facts["memory_fraction_max"] = f.memory_fraction_max;
  facts["cpus"] = f.cpus ? nlohmann::json(*f.cpus) : nlohmann::json(nullptr);
  facts["cpus_source"] = f.cpus_source;
  facts["env"] = f.env;
  facts["files"] = nlohmann::json::array();
  for (const auto& file : f.files) facts["files"].push_back({{"name", file.name}, {"bytes", file.bytes}});
  facts["sysctls"] = f.sysctls;
  j["facts"] = facts;
  j["findings"] = nlohmann::json::array();
  for (const auto& x : findings)
    j["findings"].push_back({{"level", level_name(x.level)},
                             {"check", x.check},
                             {"message", x.message},
                             {"fix", x.fix.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.fix)}});
  return j;
}

DoctorFacts gather_facts(const DoctorOptions& o) {
  const Config config = load_ctl_config();
  DoctorFacts f;
  f.memory_fraction_max = config.memory_fraction_max;
  if (o.container) {
    if (o.container->empty()) throw Error("doctor: the CONTAINER argument is empty: give a container name or id");
    gather_from_host(o.engine.value_or(config.engine), *o.container, f);
  } else {
    if (o.engine)
      throw Error("doctor: --engine " + *o.engine +
                  " names the engine of a CONTAINER argument: give the container, or run doctor "
                  "inside it without "
                  "--engine");
    gather_inside(f);
  }
  return f;
}

int run_doctor(const DoctorOptions& o) {
  const DoctorFacts facts = gather_facts(o);
  const std::vector<Finding> findings = diagnose(facts);
  if (o.json)
    std::cout << doctor_json(facts, findings).dump(2) << "\n";
  else
    std::cout << format_findings(facts, findings);
  std::cout.flush();
  return doctor_exit_code(findings);
}

void add_doctor_command(CLI::App& app) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand("doctor",
                                     "Check /dev/shm for PyTorch DataLoader and NCCL: inside a "
                                     "container, or a running docker/podman container");
  std::ostringstream footer;
  footer << "Without CONTAINER it checks the container it runs in. With CONTAINER it inspects it once and reads\n"
         << "its /dev/shm through /proc/PID/root on the host (root needed; nothing is started in the container).\n"
         << "Checks: /dev/shm size against the engines' 64MiB default, its use, the ipc mode, the memory limit\n"
         << "against the shm size, " << kEnvShmSize << "/" << kEnvProfile << " against the size applied, "
         << kEnvNumWorkers << "\n"
         << "against the CPUs, leftover torch_* and nccl-* segments, kernel.shmmax/shmall (which do not size\n"
         << "/dev/shm). Exit status: the worst finding, 0 OK, 3 WARN, 4 FAIL; 1 when doctor could not check,\n"
         << "2 a wrong request (bad option, unknown or stopped container).";
  cmd->footer(footer.str());
  cmd->add_option("CONTAINER", o->container, "Name or id of a running container (default: the one doctor runs in)");
  cmd->add_option("--engine", o->engine, "Engine of CONTAINER (default: the config's engine, else docker)")
      ->type_name("ENGINE")
      ->check(CLI::IsMember({"docker", "podman"}));
  cmd->add_flag("--json", o->json, "Print the facts and findings as JSON");
  cmd->callback([o] {
    const int code = run_doctor(*o);
    if (code != kExitOk)
      throw Error(std::string("doctor: worst finding ") +
                      level_name(code == kDoctorExitFail ? Level::kFail : Level::kWarn) + " (exit " +
                      std::to_string(code) + ")",
                  0, code);
  });
}

}  // namespace gpurun
