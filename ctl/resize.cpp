#include "ctl/resize.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_lock.hpp"
#include "base/log.hpp"
#include "base/process.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/run_options.hpp"
#include "decision/config.hpp"
#include "decision/refusal.hpp"
#include "engine/run_args.hpp"
#include "oci/host.hpp"
#include "shm/shm_mount.hpp"
#include "shm/shm_remount.hpp"

namespace gpurun {

// What resize changes and what it refuses.
constexpr const char* kResizeFooter =
    "SIZE in Docker's syntax (e.g. 2g), or the size the sizing flags plan (as `gpu-run-ctl plan`).\n"
    "The size may go down, never below what /dev/shm holds now, and not past the memory budget\n"
    "(memory_fraction_max of the container's --memory) without --force. --ipc=shareable and\n"
    "--ipc=container:X resize the one shared tmpfs; --ipc=none, --ipc=host and a bound-in host\n"
    "/dev/shm are refused. `docker inspect` keeps the old ShmSize. Needs root; exit 2 on a refusal.";

namespace {

// The container's /dev/shm seen from the host: /proc/PID/root, then dev/shm resolved in that
// root refusing every symlink (the image controls the path), then fstat* of the open dir.
ShmFacts probe_shm(const ContainerInfo& c, std::optional<dev_t> host_dev) {
  const std::string root_path = "/proc/" + std::to_string(c.pid) + "/root";
  UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw system_error("open " + root_path + " of container " + display_name(c), errno);
  const ShmProbe p = probe_shm_dir(root.get(), Resolve::kNoSymlinks, "/dev/shm of container " + display_name(c));
  if (p.error == ELOOP || p.error == ENOTDIR)
    throw usage_error("/dev or /dev/shm in container " + display_name(c) +
                      " is a symlink or not a directory: refusing to follow it (nothing changed)");
  if (p.error == ENOENT) throw usage_error("container " + display_name(c) + " has no /dev/shm: nothing to resize");
  const FsStat& shm_fs = p.fs;
  ShmFacts f;
  f.host_shm = host_dev && shm_fs.st.st_dev == *host_dev;
  f.tmpfs_mount = p.mount == ShmMount::kTmpfs;
  f.size = shm_fs.size();
  f.used = shm_fs.used();
  return f;
}

std::uint64_t size_asked(const ResizeOptions& o, const Config& config) {
  const SizingFlags& s = o.sizing;
  const bool planning = s.profile || s.gpus || s.workers || s.batch_size || s.prefetch_factor;
  if (o.size && planning) throw usage_error("resize: give SIZE or the sizing flags (--profile, --gpus, ...), not both");
  if (o.size) return parse_size(*o.size, "SIZE");
  if (!planning)
    throw usage_error(
        "resize: missing SIZE: usage: gpu-run-ctl resize CONTAINER SIZE, or CONTAINER --profile NAME "
        "--gpus N [--workers N --batch-size N ...]");
  // The budget is checked by plan_resize (which --force may pass), not by the plan.
  const ShmPlan plan = plan_from_flags(s, EngineOptionFacts{}, config, node_host_facts(probe_host()));
  require_fits(plan, kFlagWords);
  return plan.shm;
}

}  // namespace

ContainerInfo shm_owner(const ContainerInfo& info, const std::function<ContainerInfo(const std::string&)>& inspect) {
  if (info.ipc.kind != IpcKind::kJoined) return info;
  ContainerInfo owner = inspect(info.ipc.owner);
  if (!owner.running || owner.pid <= 0)
    throw usage_error("container " + display_name(info) + " uses the /dev/shm of container " + display_name(owner) +
                      " (--ipc=container:" + info.ipc.owner.substr(0, 12) + "), which is not running");
  return owner;
}

std::string resize_report(const ContainerInfo& info, const ContainerInfo& owner, const ShmFacts& before,
                          std::uint64_t after, bool over_budget) {
  const bool joined = owner.id != info.id;
  std::string out = "container " + display_name(info) + " (" + short_id(info) + ", " + info.engine + "): /dev/shm " +
                    format_size(before.size) + " -> " + format_size(after) + " (" + format_size(before.used) +
                    " used, files kept)" + (over_budget ? ", over the memory budget (--force)" : "") + "\n";
  if (joined)
    out += "  it uses the IPC namespace of container " + display_name(owner) + " (" + short_id(owner) +
           ", --ipc=container:...): resized that one's /dev/shm\n";
  if (owner.ipc.kind == IpcKind::kShareable || joined)
    out += "  shared: the engine's tmpfs, bound in; every container that joined the IPC namespace of " +
           display_name(owner) + " (ipc=container:..., a pod) sees the new size\n";
  out += "  `" + info.engine +
         " inspect` keeps showing the old ShmSize; gpu-run-ctl doctor and watch read the live size\n";
  return out;
}

void run_resize(const ResizeOptions& o) {
  const Config config = load_ctl_config();
  ContainerInfo info = inspect_running(o.engine, config, o.container, "only a running container's /dev/shm is resized");
  const std::string engine = info.engine;
  const auto inspect = [&](const std::string& name) { return inspect_container(engine, name); };
  ContainerInfo owner = shm_owner(info, inspect);
  // One resize of a /dev/shm at a time: the second waits, then reads the container again (it
  // may have exited, and its pid been reused, meanwhile) and resizes from the first's result.
  FileLock lock(shm_lock_path(owner.id), false);
  if (!lock.locked()) {
    std::cerr << "gpu-run-ctl: resize: waiting for another resize of container " << display_name(owner) << "\n";
    lock.wait();
    const ContainerInfo now = inspect(info.id);
    if (!now.running || now.pid <= 0)
      throw usage_error("container " + display_name(info) +
                        " stopped while its resize waited for another one: nothing changed");
    info = now;
    owner = shm_owner(info, inspect);
  }
  const IpcMode& ipc = info.ipc.kind == IpcKind::kJoined ? owner.ipc : info.ipc;

  const auto host_dev = host_shm_device();
  ResizeAsk ask;
  ask.size = size_asked(o, config);
  ask.force = o.force;
  ask.memory_fraction_max = config.memory_fraction_max;
  ask.container = display_name(owner);
  for (const ContainerInfo* c : {&info, &owner})
    if (c->memory_limit && *c->memory_limit > 0 && (!ask.memory_limit || *c->memory_limit < *ask.memory_limit))
      ask.memory_limit = c->memory_limit;
  // Refusals by IPC mode need no look inside the container.
  ShmFacts facts;
  const bool host_ipc = in_host_ipc_namespace(std::to_string(owner.pid), "container " + display_name(owner));
  if (ipc.kind != IpcKind::kNone && ipc.kind != IpcKind::kHost && !host_ipc) facts = probe_shm(owner, host_dev);
  facts.host_ipc = host_ipc;
  const ResizePlan plan = plan_resize(ipc, facts, ask);
  if (plan.refusal) throw usage_error(refusal_words(*plan.refusal, kFlagWords));

  Logger log(config.log_file.string(), parse_log_level(config.log_level), "gpu-run-ctl");
  const std::string who = "container=" + log_quote(owner.id.substr(0, 64)) +
                          (owner.id != info.id ? " via=" + log_quote(info.id.substr(0, 64)) : "") +
                          " ipc=" + log_quote(ipc_mode_name(owner.ipc).substr(0, 80));
  ShmResult r;
  try {
    r = remount_shm(RemountRequest{owner.pid, plan.size, plan.allow_shrink, host_dev},
                    hook_program_path(config.hook_path));
  } catch (const Error& e) {
    log.error(who + " action=fail size=" + engine_size(plan.size) + " error=" + log_quote(e.what()));
    throw e.with_context("resize /dev/shm of container " + display_name(owner));
  }
  log.info(who + " action=" + outcome_name(r.outcome) + " size=" + engine_size(plan.size) + " before=" +
           engine_size(r.before) + " after=" + engine_size(r.after) + (plan.over_budget ? " forced=1" : ""));
  if (r.outcome == ShmOutcome::kHostShm)
    throw usage_error("/dev/shm of container " + display_name(owner) +
                      " is the host's: the host's /dev/shm is never resized (nothing changed)");
  if (r.outcome == ShmOutcome::kUnchanged) {
    std::cout << "container " << display_name(info) << ": /dev/shm is already " << format_size(r.after)
              << ", nothing changed\n";
    return;
  }
  if (r.outcome != ShmOutcome::kResized)
    throw Error("/dev/shm of container " + display_name(owner) + ": not resized (" + outcome_name(r.outcome) + ")");
  if (const std::optional<Error> short_by = short_of_size(r, plan.size))
    throw short_by->with_context("container " + display_name(owner));
  std::cout << resize_report(info, owner, facts, r.after, plan.over_budget);
}

void add_resize_command(CLI::App& app) {
  auto o = std::make_shared<ResizeOptions>();
  CLI::App* cmd =
      app.add_subcommand("resize", "Resize a running container's /dev/shm in place (no restart, files kept)");
  cmd->footer(kResizeFooter);
  cmd->add_option("CONTAINER", o->container, "Container name or id")->required();
  cmd->add_option("SIZE", o->size, "New /dev/shm size, Docker's syntax (e.g. 2g)");
  add_sizing_flags(*cmd, o->sizing);
  cmd->add_option("--engine", o->engine, "docker or podman (default: the config's engine)")->type_name("ENGINE");
  cmd->add_flag("--force", o->force, "Resize even past the memory budget (memory_fraction_max of --memory)");
  cmd->callback([o] { run_resize(*o); });
}

}  // namespace gpurun
