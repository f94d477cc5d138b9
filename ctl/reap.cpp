#include "ctl/reap.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <iostream>
#include <memory>
#include <sstream>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/resize.hpp"
#include "decision/config.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {
namespace reap_cmd {
namespace {

constexpr const char* kReapFooter =
    "Lists the engines' segments in a /dev/shm that no process has open or mapped (NCCL's nccl-*,\n"
    "PyTorch's torch_*, Python's shared_memory psm_* and semaphores sem.mp-* as vLLM and SGLang use\n"
    "them, vLLM's vllm*, DeepSpeed's deepspeed_allreduce_buffer_*, Triton's python backend regions),\n"
    "unchanged for --min-age seconds. Every process of the host is read (/proc/PID/fd and maps), so run\n"
    "it on the host, as root. --delete renames each orphan away from its name, reads the processes again,\n"
    "gives back the name of any one a process took meanwhile and removes the rest. Other files are\n"
    "never touched.";

// The kernel's initial PID namespace has the fixed proc inode PROC_PID_INIT_INO.
bool in_host_pid_namespace() {
  constexpr ino_t kInitialPidNamespace = 0xEFFFFFFCU;
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) throw system_error("stat /proc/self/ns/pid", errno);
  return st.st_ino == kInitialPidNamespace;
}

struct Target {
  std::string name;  // "container t1 (3f2a9c1b0e4d, docker)", "the host"
  UniqueFd dir;      // the /dev/shm, readable
  dev_t dev = 0;
};

Target open_shm(int rootfd, const std::string& what, std::string name) {
  const ShmProbe p = probe_shm_dir(rootfd, Resolve::kNoSymlinks, what);
  if (p.error == ELOOP || p.error == ENOTDIR)
    throw usage_error(what + " is a symlink or not a directory: refusing to follow it (nothing changed)");
  if (p.error == ENOENT) throw usage_error(what + " does not exist: nothing to reap");
  Target t;
  t.name = std::move(name);
  t.dir = UniqueFd(::openat(p.dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!t.dir) throw system_error("open " + what, errno);
  t.dev = p.fs.st.st_dev;
  return t;
}

Target find_target(const ReapOptions& o) {
  if (o.container && o.host) throw usage_error("reap: give CONTAINER or --host, not both");
  if (!o.container && !o.host)
    throw usage_error("reap: give CONTAINER (a running container's /dev/shm) or --host (the host's /dev/shm)");
  if (o.host && o.engine) throw usage_error("reap: --engine goes with CONTAINER, not --host");
  if (o.container && o.container->empty())
    throw usage_error("reap: the CONTAINER argument is empty: give a name or id");
  if (!in_host_pid_namespace())
    throw usage_error(
        "reap: this process is not in the host's PID namespace, so it cannot see every process that may hold "
        "a segment: run gpu-run-ctl reap on the host (nothing changed)");
  if (o.host) {
    UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) throw system_error("open /", errno);
    return open_shm(root.get(), "/dev/shm", "the host");
  }
  const Config config = load_ctl_config();
  const ContainerInfo info =
      inspect_running(o.engine, config, *o.container, "only a running container's /dev/shm is reaped");
  const ContainerInfo owner = shm_owner(info, [&](const std::string& n) { return inspect_container(info.engine, n); });
  const std::string root_path = "/proc/" + std::to_string(owner.pid) + "/root";
  UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw system_error("open " + root_path + " of container " + display_name(owner), errno);
  std::string name = "container " + display_name(info) + " (" + short_id(info) + ", " + info.engine + ")";
  if (owner.id != info.id) name += ", the /dev/shm of container " + display_name(owner);
  return open_shm(root.get(), "/dev/shm of container " + display_name(owner), name);
}

std::string row(const ShmSegment& s, const std::string& state) {
  std::ostringstream out;
  out << s.name << "  " << format_size(s.bytes) << "  " << segment_family_name(s.family) << "  " << state << "\n";
  return out.str();
}

std::uint64_t total(const std::vector<ShmSegment>& segments) {
  std::uint64_t sum = 0;
  for (const ShmSegment& s : segments) sum += s.bytes;
  return sum;
}

}  // namespace
}  // namespace reap_cmd

std::string format_reap(const std::string& target, const OrphanReport& report, const ReapResult* result,
                        std::size_t others) {
  std::string out = "gpu-run-ctl reap: /dev/shm of " + target + "\n";
  const auto in = [](const std::vector<ShmSegment>& v, const ShmSegment& s) {
    return std::any_of(v.begin(), v.end(), [&](const ShmSegment& x) { return x.name == s.name; });
  };
  for (const ShmSegment& s : report.orphans) {
    std::string state = "orphan";
    if (result) state = in(result->removed, s) ? "removed" : in(result->kept, s) ? "kept: taken meanwhile" : "failed";
    out += reap_cmd::row(s, state);
  }
  for (const ShmSegment& s : report.held) out += reap_cmd::row(s, "in use");
  for (const ShmSegment& s : report.recent) out += reap_cmd::row(s, "recent: kept");
  out += "orphans: " + std::to_string(report.orphans.size()) + " segment" + (report.orphans.size() == 1 ? "" : "s") +
         ", " + format_size(report.orphan_bytes());
  if (result) {
    out += "; removed " + std::to_string(result->removed.size()) + " (" +
           format_size(reap_cmd::total(result->removed)) + ")";
    if (!result->kept.empty()) out += ", kept " + std::to_string(result->kept.size()) + " a process took meanwhile";
    for (const std::string& f : result->failed) out += "\nfailed: " + f;
  } else if (!report.orphans.empty()) {
    out += " (--delete removes them)";
  }
  if (others) out += "\nother files, left alone: " + std::to_string(others);
  return out + "\n";
}

void run_reap(const ReapOptions& o) {
  if (o.min_age < 0)
    throw usage_error("reap: --min-age " + std::to_string(o.min_age) + " is negative: give seconds, 0 or more");
  reap_cmd::Target t = reap_cmd::find_target(o);
  UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!proc) throw system_error("open /proc", errno);
  std::vector<pid_t> unreadable;
  const OrphanReport report = find_orphans(t.dir.get(), t.dev, proc.get(), o.min_age, &unreadable);
  if (!unreadable.empty()) {
    const std::string msg =
        "reap: could not read the open files or mappings of " + std::to_string(unreadable.size()) +
        " process(es) (pid " + std::to_string(unreadable.front()) +
        "), so a segment they hold would look orphaned: run it on the host as root (CAP_SYS_PTRACE reads "
        "every process)";
    if (o.remove) throw Error(msg + " (nothing deleted)", EACCES);
    std::cerr << "gpu-run-ctl: " << msg << "; the list below may show segments in use as orphans\n";
  }
  if (!o.remove) {
    std::cout << format_reap(t.name, report, nullptr, report.others.size());
    return;
  }
  const ReapResult result = reap_orphans(t.dir.get(), t.dev, proc.get(), report.orphans);
  std::cout << format_reap(t.name, report, &result, report.others.size());
  if (!result.failed.empty())
    throw Error("reap: " + std::to_string(result.failed.size()) + " segment(s) could not be removed (listed above)");
}

void add_reap_command(CLI::App& app) {
  auto o = std::make_shared<ReapOptions>();
  CLI::App* cmd =
      app.add_subcommand("reap", "List (and with --delete remove) the segments in a /dev/shm whose owners are gone");
  cmd->footer(reap_cmd::kReapFooter);
  cmd->add_option("CONTAINER", o->container, "Name or id of a running container whose /dev/shm to reap");
  cmd->add_flag("--host", o->host, "Reap the host's /dev/shm");
  cmd->add_flag("--delete", o->remove, "Remove the orphans (default: only list them)");
  cmd->add_option("--engine", o->engine, "Engine of CONTAINER (default: the config's engine, else docker)")
      ->type_name("ENGINE")
      ->check(CLI::IsMember({"docker", "podman"}));
  cmd->add_option("--min-age", o->min_age, "Seconds a segment must be unchanged to count as an orphan")
      ->type_name("SECONDS")
      ->capture_default_str();
  cmd->callback([o] { run_reap(*o); });
}

}  // namespace gpurun
