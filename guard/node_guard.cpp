#include "guard/node_guard.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "base/env.hpp"
#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "base/process.hpp"
#include "base/program.hpp"
#include "base/stop_signal.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "decision/shm_decision.hpp"
#include "decision/sizing.hpp"
#include "guard/discovery.hpp"
#include "guard/engine_layout.hpp"
#include "guard/guard_health.hpp"
#include "guard/guard_metrics.hpp"
#include "guard/guard_orphans.hpp"
#include "guard/guard_perf_log.hpp"
#include "guard/guard_state.hpp"
#include "guard/metrics_server.hpp"
#include "guard/task_watch.hpp"
#include "oci/host.hpp"
#include "profiles/profile_store.hpp"
#include "shm/shm_grower.hpp"
#include "shm/shm_resize.hpp"

namespace gpurun {

namespace {

// What the running node guard guards, for the next one (guard_state).
constexpr const char* kNodeGuardStatePath = "/run/gpu-run/guard.state";

std::string annotation_of(const ContainerInfo& c, const char* key) {
  auto it = c.annotations.find(key);
  return it == c.annotations.end() ? "" : it->second;
}

// The node guard's lock: a POSIX record lock (fcntl F_SETLK) on kNodeGuardLockPath, held while
// the returned descriptor is open; an empty one when another process holds it. A record lock,
// not flock: it belongs to this process, never to a child (the remount helper, started by
// spawn, gets no copy of the O_CLOEXEC descriptor either), so a helper left behind by a killed
// guard cannot keep the next one from starting, as a flock inherited by a hung child once did.
UniqueFd lock_node_guard() {
  std::error_code ec;
  fs::create_directories(fs::path(kNodeGuardLockPath).parent_path(), ec);
  UniqueFd fd(::open(kNodeGuardLockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw Error(std::string("open ") + kNodeGuardLockPath, errno);
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;
  if (::fcntl(fd.get(), F_SETLK, &whole) != 0) {
    if (errno == EAGAIN || errno == EACCES) return UniqueFd();
    throw Error(std::string("lock ") + kNodeGuardLockPath, errno);
  }
  return fd;
}

struct Guarded {
  ContainerInfo info;
  std::unique_ptr<ShmGrower> grower;
  std::string profile;             // its metrics' label: what gpu-run recorded, read once
  std::unique_ptr<ShmHandle> shm;  // its /dev/shm, held open while it is guarded
  GuardLimits limits;
  std::string note;
  std::uint64_t start_time = 0;  // its process's, from /proc/<pid>/stat: the same process, not a reused pid
};

using GuardedIt = std::map<std::string, Guarded>::iterator;

// What the guard guards, for a restarted guard (guard_state.hpp).
std::string guard_state(const std::map<std::string, Guarded>& guarded) {
  std::vector<GuardStateEntry> entries;
  for (const auto& [id, g] : guarded) entries.push_back({g.info, g.start_time, g.profile, g.note, g.limits});
  return guard_state_text(entries);
}

// The containers of the last guard's state whose process is still the one it guarded.
std::vector<Found> resumed_from_state() {
  std::vector<Found> out;
  std::string text;
  try {
    text = read_small_file(kNodeGuardStatePath, 4 << 20, "the guard's state");
  } catch (const std::exception&) {
    return out;  // none yet, or unreadable: the first look at the engine finds them
  }
  constexpr std::string_view kResumed = "; resumed from the last guard";
  for (GuardStateEntry& e : parse_guard_state(text)) {
    if (process_start_time(e.info.pid) != e.start_time) continue;
    Found f{std::move(e.info), e.limits, std::move(e.note), std::move(e.profile)};
    if (f.note.size() < kResumed.size() || f.note.compare(f.note.size() - kResumed.size(), kResumed.size(), kResumed))
      f.note += kResumed;
    out.push_back(std::move(f));
  }
  return out;
}

// One run of the node guard: what it guards and the parts that watch it. The sampler's thread
// owns it; the discovery's thread and the metrics server's read only what they are handed.
class GuardRun {
 public:
  GuardRun(const NodeGuard& guard, const Config& config, const GuardClock& clock, bool metrics_served)
      : config_(config),
        clock_(clock),
        metrics_served_(metrics_served),
        // Until the first pass, the discovery is given the poll's period: Docker's and podman's
        // directories are looked for first.
        progress_(clock.now(), guard.interval(), guard.engine() == "containerd" ? kWatchEvery : kPollEvery) {
    if (metrics_served) orphans_ = std::make_unique<OrphanScanner>(metrics_);
  }

  // The routes of --metrics: the metrics table and the two probes, answered from the loops' progress.
  MetricsRoutes routes() {
    MetricsRoutes routes;
    routes.metrics = [this] {
      return metrics_.render({GPU_RUN_VERSION, progress_.last_sample_seconds(), progress_.last_discovery_seconds()});
    };
    routes.healthz = [this] { return progress_.health(clock_.now().steady, /*readiness=*/false); };
    routes.readyz = [this] { return progress_.health(clock_.now().steady, /*readiness=*/true); };
    return routes;
  }
  GuardProgress& progress() { return progress_; }

  // A container found worth guarding: guarded from now on (its old process's guarding ends when
  // its id runs a new one).
  void start_guarding(Found& f) {
    if (auto it = guarded_.find(f.info.id); it != guarded_.end()) {
      if (it->second.info.pid == f.info.pid) return;
      stop_guarding(it, StopReason::kStartedAgain);
    }
    print_line("gpu-run-ctl: guard: guarding container " + display_name(f.info) + " (" + short_id(f.info) +
               "): " + f.note);
    auto grower = std::make_unique<ShmGrower>(config_.guard, f.limits, config_,
                                              "gpu-run-ctl: guard: container " + display_name(f.info));
    const std::string id = f.info.id;
    std::string profile = f.profile;
    auto shm = std::make_unique<ShmHandle>(f.info.pid);
    const std::uint64_t start = process_start_time(f.info.pid);
    GuardLimits limits = f.limits;
    std::string note = f.note;
    if (orphans_) orphans_->track(id, f.info.pid);
    guarded_.emplace(id, Guarded{std::move(f.info), std::move(grower), std::move(profile), std::move(shm),
                                 std::move(limits), std::move(note), start});
    changed_ = true;
  }

  // The one place where a container stops being guarded, whatever the reason: its line, its
  // metrics and orphan scan dropped, its decision record removed when it is gone.
  GuardedIt stop_guarding(GuardedIt it, StopReason why) {
    const unsigned growths = it->second.grower->growths();
    print_line("gpu-run-ctl: guard: stopped guarding container " + display_name(it->second.info) + " (" +
               short_id(it->second.info) + "): " + stop_reason_text(why) + ", " + std::to_string(growths) +
               (growths == 1 ? " growth" : " growths"));
    metrics_.remove(it->first);
    if (orphans_) orphans_->untrack(it->first);
    if (removes_decision_record(why)) {
      perf_log_.on_end(it->second.info, *it->second.grower);  // before its record goes
      remove_decision_state(kDecisionDir, it->first);
    }
    changed_ = true;
    return guarded_.erase(it);
  }

  // What the discovery published since the last look: the containers no longer running stop
  // being guarded, the new ones start.
  void follow(Roster& roster) {
    if (!roster.take(seen_, found_, running_)) return;
    for (auto it = guarded_.begin(); it != guarded_.end();)
      it = running_.count(it->first) ? std::next(it) : stop_guarding(it, StopReason::kExited);
    for (Found& f : found_) start_guarding(f);
  }

  // What it guards, for a restarted guard, after each change.
  void keep_state() {
    if (!changed_) return;
    changed_ = false;
    try {
      write_file_atomic(kNodeGuardStatePath, guard_state(guarded_), 0600, Durability::kVolatile);
    } catch (const std::exception& e) {
      print_warning("gpu-run-ctl", std::string("guard: cannot keep its state for a restart: ") + e.what());
    }
  }

  // One pass of the sampler: each guarded container's /dev/shm sampled and grown as its policy
  // says, and its metrics updated when they are served.
  void sample_all() {
    for (auto it = guarded_.begin(); it != guarded_.end();) {
      const std::optional<ShmUsage> usage = it->second.shm->sample();
      if (!usage) {
        it = stop_guarding(it, StopReason::kShmGone);
        continue;
      }
      sample(it->second, *usage);
      ++it;
    }
    progress_.sampled(clock_.now());
  }

  // The metrics' scan of orphaned segments stops before the last containers are let go.
  void stop_scanning_orphans() { orphans_.reset(); }

  // Every container let go: the guard stops.
  void stop_all() {
    for (auto it = guarded_.begin(); it != guarded_.end();) it = stop_guarding(it, StopReason::kGuardStopped);
  }

 private:
  void sample(Guarded& g, const ShmUsage& usage) {
    const ContainerInfo& c = g.info;
    ShmGrower& grower = *g.grower;
    const unsigned growths_before = grower.growths();
    try {
      grower.on_sample(c.pid, c.id, usage);
    } catch (const std::exception& e) {
      print_warning("gpu-run-ctl", "guard: container " + display_name(c) + ": " + e.what());
    }
    if (!metrics_served_) return;
    // After a growth the sample is stale: the size is read again.
    const ShmUsage now = grower.growths() != growths_before ? g.shm->sample().value_or(usage) : usage;
    metrics_.update({c.id, c.name, g.profile, c.engine, annotation_of(c, kCriSandboxNamespace),
                     annotation_of(c, kCriSandboxName), now.size, now.used, std::max(now.used, usage.used),
                     grower.growths(), grower.refusals(), grower.blocked() ? 1u : 0u, std::nullopt});
  }

  const Config& config_;
  const GuardClock& clock_;
  const bool metrics_served_;
  GuardMetrics metrics_;
  GuardProgress progress_;
  std::unique_ptr<OrphanScanner> orphans_;  // with --metrics: gpu_run_shm_orphaned_bytes
  std::map<std::string, Guarded> guarded_;
  GuardPerfLog perf_log_;  // a line for each container that ends (profiles learn)
  bool changed_ = false;
  unsigned seen_ = 0;
  std::vector<Found> found_;
  std::set<std::string> running_;
};

}  // namespace

const char* stop_reason_text(StopReason why) {
  switch (why) {
    case StopReason::kExited:
      return "exited";
    case StopReason::kShmGone:
      return "its /dev/shm is gone";
    case StopReason::kStartedAgain:
      return "started again";
    case StopReason::kGuardStopped:
      return "guard stopped";
  }
  return "?";
}

bool removes_decision_record(StopReason why) { return why == StopReason::kExited || why == StopReason::kShmGone; }

std::string guard_start_line(const std::string& engine, bool all) {
  return all ? "guarding every running " + engine + " container"
             : "guarding the " + engine + " containers gpu-run sized";
}

NodeGuard::NodeGuard(GuardOptions options, Config config, GuardClock clock)
    : options_(std::move(options)), config_(std::move(config)), clock_(std::move(clock)) {
  const std::uint64_t interval = parse_count(options_.interval_ms, "--interval", 60000);
  if (interval == 0) throw usage_error("--interval 0: expected milliseconds between samples, 1 to 60000");
  interval_ = std::chrono::milliseconds(interval);
  if (options_.metrics_public && !options_.metrics) throw usage_error("--metrics-public: give --metrics ADDR too");
  if (options_.metrics) address_ = parse_metrics_address(*options_.metrics, options_.metrics_public);
  engine_ = options_.engine.value_or(config_.engine);
  if (engine_ != "docker" && engine_ != "podman" && engine_ != "containerd")
    throw usage_error("--engine '" + engine_.substr(0, 40) + "': expected docker, podman or containerd");
}

void NodeGuard::run(const std::function<bool()>& stop) const {
  // One node guard a host. Two would both guard every container; the container's lock keeps them
  // from growing it twice, but each would count only its own growths, so neither one's metrics
  // would be the host's (issue: two guards at once, each with partial counts).
  const UniqueFd only_guard = lock_node_guard();
  if (!only_guard)
    throw Error(std::string("another gpu-run-ctl guard runs on this host (it holds ") + kNodeGuardLockPath +
                "): one guard a host, so its metrics count every growth; stop that one first "
                "(systemctl stop gpu-run-guard)");
  // The sign this host's doors read (node_guard_runs): while it is locked they plan a learned
  // profile tight, since this guard grows the run that peaks higher. Without it they plan as if no
  // guard ran, the safe side: a warning, not a guard that does not start.
  UniqueFd alive;
  try {
    alive = publish_node_guard_alive();
  } catch (const Error& e) {
    std::cerr << "gpu-run-ctl: warning: guard: " << e.what()
              << ": this host's doors will plan learned profiles as if no guard ran\n";
  }

  GuardRun guard(*this, config_, clock_, address_.has_value());
  std::unique_ptr<MetricsServer> server;
  if (address_) {
    server = serve_metrics(*address_, guard.routes());
    std::cerr << "gpu-run-ctl: guard: metrics at "
              << (address_->unix_socket ? metrics_address_text(*address_) + " (GET /metrics)"
                                        : "http://" + metrics_address_text(*address_) + "/metrics")
              << ", health at /healthz and /readyz\n";
  }
  std::cerr << "gpu-run-ctl: guard: " << guard_start_line(engine_, options_.all) << ", /dev/shm sampled every "
            << interval_.count() << " ms\n";
  // One admission step for every engine and both ways of finding containers (container_admission.hpp).
  const ProfileStore store(container_profile_search_path(config_.profile_dirs));
  AdmissionContext admission;
  admission.config = config_;
  admission.load_profile = [&store](const std::string& name) { return store.load(name, /*allow_path=*/false); };
  admission.decision_dir = kDecisionDir;
  admission.host_memory = probe_host().mem_total;
  admission.all = options_.all;
  Roster roster;
  // containerd's task directory is checked before the guard says it runs: a wrong
  // --containerd-state is an error at start, not a guard that never sees a container.
  std::unique_ptr<TaskWatcher> watcher =
      engine_ == "containerd" ? std::make_unique<TaskWatcher>(fs::path(options_.containerd_state) / kContainerdTaskDir)
                              : nullptr;
  std::thread poller([&] { discover(engine_, admission, roster, guard.progress(), clock_, watcher); });

  // What the last guard guarded, at once: the first look at the engine comes after.
  for (Found& f : resumed_from_state()) guard.start_guarding(f);
  while (!stop()) {
    guard.follow(roster);
    guard.keep_state();
    guard.sample_all();
    clock_.sleep(interval_);
  }
  // Growing nothing from here on: the doors plan as if no guard ran.
  if (alive) ::unlink(kNodeGuardAlivePath);
  alive.reset();
  roster.stop();
  poller.join();
  guard.stop_scanning_orphans();
  server.reset();
  guard.stop_all();
  std::cerr << "gpu-run-ctl: guard: stopped\n";
}

}  // namespace gpurun
