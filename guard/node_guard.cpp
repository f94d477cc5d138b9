#include "guard/node_guard.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <time.h>
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

// Held by the running node guard (lock_node_guard: the kernel drops it when the guard exits, however).
constexpr const char* kNodeGuardLockPath = "/run/gpu-run/guard.lock";
// What the running node guard guards, for the next one (guard_state).
constexpr const char* kNodeGuardStatePath = "/run/gpu-run/guard.state";
void sleep_for(std::chrono::nanoseconds d) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(d.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(d.count() % 1000000000);
  ::nanosleep(&ts, nullptr);  // EINTR (SIGTERM) returns early: the caller checks stop_requested()
}

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
  std::unique_ptr<ShmGrower> guard;
  std::string profile;             // its metrics' label: what gpu-run recorded, read once
  std::unique_ptr<ShmHandle> shm;  // its /dev/shm, held open while it is guarded
  GuardLimits limits;
  std::string note;
  std::uint64_t start_time = 0;  // its process's, from /proc/<pid>/stat: the same process, not a reused pid
};

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

}  // namespace

std::string guard_start_line(const std::string& engine, bool all) {
  return all ? "guarding every running " + engine + " container"
             : "guarding the " + engine + " containers gpu-run sized";
}

void run_guard(const GuardOptions& o, const Config& config) {
  const std::uint64_t interval = parse_count(o.interval_ms, "--interval", 60000);
  if (interval == 0) throw usage_error("--interval 0: expected milliseconds between samples, 1 to 60000");
  if (o.metrics_public && !o.metrics) throw usage_error("--metrics-public: give --metrics ADDR too");
  const std::optional<MetricsAddress> address =
      o.metrics ? std::optional(parse_metrics_address(*o.metrics, o.metrics_public)) : std::nullopt;
  const std::string engine = o.engine.value_or(config.engine);
  if (engine != "docker" && engine != "podman" && engine != "containerd")
    throw usage_error("--engine '" + engine.substr(0, 40) + "': expected docker, podman or containerd");
  // One node guard a host. Two would both guard every container; the container's lock keeps them
  // from growing it twice, but each would count only its own growths, so neither one's metrics
  // would be the host's (issue: two guards at once, each with partial counts).
  const UniqueFd only_guard = lock_node_guard();
  if (!only_guard)
    throw Error(std::string("another gpu-run-ctl guard runs on this host (it holds ") + kNodeGuardLockPath +
                "): one guard a host, so its metrics count every growth; stop that one first "
                "(systemctl stop gpu-run-guard)");

  GuardMetrics metrics;
  // Until the first pass, the discovery is given the poll's period: Docker's and podman's
  // directories are looked for first.
  GuardProgress progress(GuardInstant::now(), std::chrono::milliseconds(interval),
                         engine == "containerd" ? kWatchEvery : kPollEvery);
  std::unique_ptr<MetricsServer> server;
  std::unique_ptr<OrphanScanner> orphans;  // with --metrics: gpu_run_shm_orphaned_bytes
  if (address) {
    MetricsRoutes routes;
    routes.metrics = [&] {
      return metrics.render({GPU_RUN_VERSION, progress.last_sample_seconds(), progress.last_discovery_seconds()});
    };
    routes.healthz = [&progress] { return progress.health(std::chrono::steady_clock::now(), /*readiness=*/false); };
    routes.readyz = [&progress] { return progress.health(std::chrono::steady_clock::now(), /*readiness=*/true); };
    server = serve_metrics(*address, std::move(routes));
    orphans = std::make_unique<OrphanScanner>(metrics);
    std::cerr << "gpu-run-ctl: guard: metrics at "
              << (address->unix_socket ? metrics_address_text(*address) + " (GET /metrics)"
                                       : "http://" + metrics_address_text(*address) + "/metrics")
              << ", health at /healthz and /readyz\n";
  }
  StopOnSignal stop;
  std::cerr << "gpu-run-ctl: guard: " << guard_start_line(engine, o.all) << ", /dev/shm sampled every " << interval
            << " ms\n";
  // One admission step for every engine and both ways of finding containers (container_admission.hpp).
  const ProfileStore store(profile_search_path({}, config.profile_dirs, /*include_user=*/false));
  AdmissionContext admission;
  admission.config = config;
  admission.load_profile = [&store](const std::string& name) { return store.load(name, /*allow_path=*/false); };
  admission.decision_dir = kDecisionDir;
  admission.host_memory = probe_host().mem_total;
  admission.all = o.all;
  Roster roster;
  // containerd's task directory is checked before the guard says it runs: a wrong
  // --containerd-state is an error at start, not a guard that never sees a container.
  std::unique_ptr<TaskWatcher> watcher =
      engine == "containerd" ? std::make_unique<TaskWatcher>(fs::path(o.containerd_state) / kContainerdTaskDir)
                             : nullptr;
  std::thread poller([&] { discover(engine, admission, roster, progress, watcher); });

  std::map<std::string, Guarded> guarded;
  GuardPerfLog perf_log;
  unsigned seen = 0;
  std::vector<Found> found;
  std::set<std::string> running;
  bool changed = false;
  const auto stop_guarding = [&](std::map<std::string, Guarded>::iterator it, const char* why) {
    print_line("gpu-run-ctl: guard: stopped guarding container " + display_name(it->second.info) + " (" +
               short_id(it->second.info) + "): " + why + ", " + std::to_string(it->second.guard->growths()) +
               (it->second.guard->growths() == 1 ? " growth" : " growths"));
    metrics.remove(it->first);
    if (orphans) orphans->untrack(it->first);
    // The hook's record of a container that is gone (a restart writes a new one first).
    if (std::string_view(why) != "guard stopped" && std::string_view(why) != "started again") {
      perf_log.on_end(it->second.info, *it->second.guard);  // before its record goes
      remove_decision_state(kDecisionDir, it->first);
    }
    changed = true;
    return guarded.erase(it);
  };
  const auto start_guarding = [&](Found& f) {
    if (auto it = guarded.find(f.info.id); it != guarded.end()) {
      if (it->second.info.pid == f.info.pid) return;
      stop_guarding(it, "started again");  // its old process is gone: the new one is guarded
    }
    print_line("gpu-run-ctl: guard: guarding container " + display_name(f.info) + " (" + short_id(f.info) +
               "): " + f.note);
    auto guard = std::make_unique<ShmGrower>(config.guard, f.limits, config,
                                             "gpu-run-ctl: guard: container " + display_name(f.info));
    const std::string id = f.info.id;
    std::string profile = f.profile;
    auto shm = std::make_unique<ShmHandle>(f.info.pid);
    const std::uint64_t start = process_start_time(f.info.pid);
    GuardLimits limits = f.limits;
    std::string note = f.note;
    if (orphans) orphans->track(id, f.info.pid);
    guarded.emplace(id, Guarded{std::move(f.info), std::move(guard), std::move(profile), std::move(shm),
                                std::move(limits), std::move(note), start});
    changed = true;
  };
  // What the last guard guarded, at once: the first look at the engine comes after.
  for (Found& f : resumed_from_state()) start_guarding(f);
  while (!stop_requested()) {
    if (roster.take(seen, found, running)) {
      for (auto it = guarded.begin(); it != guarded.end();)
        it = running.count(it->first) ? std::next(it) : stop_guarding(it, "exited");
      for (Found& f : found) start_guarding(f);
    }
    if (changed) {
      changed = false;
      try {
        write_file_atomic(kNodeGuardStatePath, guard_state(guarded), 0600, Durability::kVolatile);
      } catch (const std::exception& e) {
        print_warning("gpu-run-ctl", std::string("guard: cannot keep its state for a restart: ") + e.what());
      }
    }
    for (auto it = guarded.begin(); it != guarded.end();) {
      const std::optional<ShmUsage> usage = it->second.shm->sample();
      if (!usage) {
        it = stop_guarding(it, "its /dev/shm is gone");
        continue;
      }
      const ContainerInfo& c = it->second.info;
      ShmGrower& guard = *it->second.guard;
      const unsigned growths_before = guard.growths();
      try {
        guard.on_sample(c.pid, c.id, *usage);
      } catch (const std::exception& e) {
        print_warning("gpu-run-ctl", "guard: container " + display_name(c) + ": " + e.what());
      }
      if (server) {
        // After a growth the sample is stale: the size is read again.
        const ShmUsage now = guard.growths() != growths_before ? it->second.shm->sample().value_or(*usage) : *usage;
        metrics.update({c.id, c.name, it->second.profile, c.engine, annotation_of(c, kCriSandboxNamespace),
                        annotation_of(c, kCriSandboxName), now.size, now.used, std::max(now.used, usage->used),
                        guard.growths(), guard.refusals(), guard.blocked() ? 1u : 0u, std::nullopt});
      }
      ++it;
    }
    progress.sampled(GuardInstant::now());
    sleep_for(std::chrono::milliseconds(interval));
  }
  roster.stop();
  poller.join();
  orphans.reset();
  server.reset();
  for (auto it = guarded.begin(); it != guarded.end();) it = stop_guarding(it, "guard stopped");
  std::cerr << "gpu-run-ctl: guard: stopped\n";
}

}  // namespace gpurun
