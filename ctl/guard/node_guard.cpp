#include "node_guard.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
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

#include "config.hpp"
#include "contract.hpp"
#include "ctl_common.hpp"
#include "engine_layout.hpp"
#include "env.hpp"
#include "error.hpp"
#include "fd.hpp"
#include "file_io.hpp"
#include "guard.hpp"
#include "guard_health.hpp"
#include "guard_metrics.hpp"
#include "guard_orphans.hpp"
#include "metrics_server.hpp"
#include "process.hpp"
#include "profile_store.hpp"
#include "program.hpp"
#include "shm_decision.hpp"
#include "shm_resize.hpp"
#include "sizing.hpp"
#include "task_watch.hpp"
#include "units.hpp"

namespace gpurun {

// What guard watches and the policy it applies.
constexpr const char* kGuardFooter =
    "The node-wide gpu-run --guard (the same policy, the config's \"guard\" knobs, and the same host log\n"
    "lines): guards the engine's running containers with a gpu-run.profile or gpu-run.shm-size label (every\n"
    "one with --all) as they start, and samples each one's /dev/shm. Instead of polling, it watches with\n"
    "inotify the directories where the runtime writes each container's pid. --engine docker: the tasks of\n"
    "dockerd's containerd (found from dockerd's and containerd's flags and configs); podman: its store's run\n"
    "root (podman info); containerd: its task directories (--containerd-state), Kubernetes' pods and Docker's\n"
    "containers, a pod's series labelled with namespace, pod and container. Where docker's or podman's cannot\n"
    "be found, it says so and lists `<engine> ps` every 2 s instead. One guard a host (a second one exits 1).\n"
    "A container whose GPU_RUN_PROFILE, GPU_RUN_NUM_WORKERS and GPU_RUN_BATCH_SIZE are set keeps one batch per\n"
    "worker free (per GPU with GPU_RUN_GPUS or the gpu-run.gpus label); any other keeps the config's\n"
    "min_free_fraction. Never beyond the profile's max_shm nor the memory budget of --memory.\n"
    "Runs until SIGTERM or SIGINT (exit 0). Needs root. Packaged as gpu-run-guard.service (not enabled).\n"
    "A pod's memory-backed emptyDir is never made smaller, nor grown past its sizeLimit (GPU_RUN_SHM_LIMIT).\n"
    "--metrics ADDR serves GET /metrics (Prometheus text): each guarded container's /dev/shm size, used and\n"
    "peak bytes, growths and refused growths, the guard's version and its loops' last passes; GET /healthz\n"
    "(503 when the sampler or the discovery has made no pass in 3 of its periods, at least 10 s) and /readyz\n"
    "(503 also until both have made one). ADDR: 127.0.0.1:PORT, [::1]:PORT or unix:/PATH; another\n"
    "address only with --metrics-public (plain HTTP, no authentication). Needs gpu-run-metrics-http.so.";
namespace {

// Held by the running node guard (lock_node_guard: the kernel drops it when the guard exits, however).
constexpr const char* kNodeGuardLockPath = "/run/gpu-run/guard.lock";
// What the running node guard guards, for the next one (guard_state).
constexpr const char* kNodeGuardStatePath = "/run/gpu-run/guard.state";
// How often the engine is asked which containers run.
constexpr auto kPollEvery = std::chrono::milliseconds(2000);
// How long the watch waits for its directories' events before it makes another pass.
constexpr auto kWatchEvery = std::chrono::milliseconds(100);

void sleep_for(std::chrono::nanoseconds d) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(d.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(d.count() % 1000000000);
  ::nanosleep(&ts, nullptr);  // EINTR (SIGTERM) returns early: the caller checks stop_requested()
}

// A running container the poller found worth guarding.
struct Found {
  ContainerInfo info;
  GuardLimits limits;
  std::string note;
  std::string profile;  // set when resumed from the state; else from what gpu-run recorded
};

// What the poller hands the sampler: the new containers, and every id the engine lists.
class Roster {
 public:
  void publish(std::vector<Found> found, std::set<std::string> running) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& f : found) new_.push_back(std::move(f));
    running_ = std::move(running);
    ++generation_;
  }
  // True when something was published since the last take.
  bool take(unsigned& seen, std::vector<Found>& found, std::set<std::string>& running) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation_ == seen) return false;
    seen = generation_;
    found = std::move(new_);
    new_.clear();
    running = running_;
    return true;
  }
  // The poller waits between polls here; stop() ends the wait at once (a guard being restarted
  // leaves its containers unguarded until it has exited: it must not sleep out a poll interval).
  bool wait_stopped(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex_);
    return stopped_cv_.wait_for(lock, d, [this] { return stopped_; });
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    stopped_cv_.notify_all();
    const std::uint64_t one = 1;
    (void)!::write(stopped_fd_.get(), &one, sizeof one);
  }
  // Readable once stopped: a watcher waiting in poll() wakes at once.
  int stopped_fd() const { return stopped_fd_.get(); }

 private:
  UniqueFd stopped_fd_{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::mutex mutex_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;
  std::vector<Found> new_;
  std::set<std::string> running_;
  unsigned generation_ = 0;
};

// Lists the candidates every kPollEvery, inspects the new ones (once each) and publishes them,
// a pass of the discovery each time; returns when stopped, or when `can_watch` says the engine's
// directories can be watched now.
void poll_engine(const std::string& engine, const GuardOptions& o, const Config& config, Roster& roster,
                 GuardProgress& progress, const std::function<bool()>& can_watch) {
  const auto commands = guard_ps_commands(engine, o.all);
  ProfileStore store(profile_search_path({}, config, /*include_user=*/false));
  const auto load = [&store](const std::string& name) { return store.load(name, /*allow_path=*/false); };
  std::set<std::string> known;          // inspected already (guarded or skipped)
  std::set<std::string> uninspectable;  // listed, but inspect failed once
  bool failing = false;
  while (!stop_requested()) {
    std::set<std::string> running;
    std::string failure;
    for (const auto& argv : commands) {
      try {
        const Captured r = run_capture(argv);
        if (r.exit_code != 0) {
          failure = r.err.substr(0, r.err.find('\n'));
          continue;
        }
        std::istringstream lines(r.out);
        for (std::string id; std::getline(lines, id);)
          if (!id.empty()) running.insert(id);
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    if (!failure.empty()) {
      if (!failing) print_warning("gpu-run-ctl", "guard: " + engine + " ps failed: " + failure);
      failing = true;
    } else {
      failing = false;
      std::vector<Found> found;
      for (const std::string& id : running) {
        if (known.count(id)) continue;
        try {
          Found f{inspect_container(engine, id), {}, {}, {}};
          known.insert(id);
          const std::string skip = guard_skip_reason(f.info, o.all);
          if (!skip.empty()) {
            print_line("gpu-run-ctl: guard: not guarding container " + display_name(f.info) + " (" + short_id(f.info) +
                       "): " + skip);
            continue;
          }
          f.limits = container_guard_limits(f.info, config, load, &f.note);
          found.push_back(std::move(f));
        } catch (const std::exception& e) {
          // Most often removed between ps and inspect, which is no news: said only when the
          // next poll still lists it and inspect fails again.
          if (!uninspectable.insert(id).second)
            print_warning("gpu-run-ctl", "guard: container " + id.substr(0, 12) + ": " + e.what());
        }
      }
      for (auto it = known.begin(); it != known.end();) it = running.count(*it) ? std::next(it) : known.erase(it);
      for (auto it = uninspectable.begin(); it != uninspectable.end();)
        it = running.count(*it) && !known.count(*it) ? std::next(it) : uninspectable.erase(it);
      roster.publish(std::move(found), running);
    }
    progress.discovered(GuardInstant::now(), kPollEvery);
    if (roster.wait_stopped(kPollEvery) || can_watch()) return;
  }
}

// The node guard's lock: a POSIX record lock (fcntl F_SETLK) on kNodeGuardLockPath, held while
// the returned descriptor is open; an empty one when another process holds it. A record lock,
// not flock: a forked child (the sandboxed remount) does not inherit it, so a child left behind by
// a killed guard cannot keep the next one from starting, as a flock inherited by a hung child did
// under ASan.
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

std::string label_of(const ContainerInfo& c, const char* key) {
  auto it = c.labels.find(key);
  return it == c.labels.end() ? "" : it->second;
}

// A pod's memory-backed emptyDir at /dev/shm (the webhook's route: docs/ARCHITECTURE.md, "A
// pod's memory-backed emptyDir"). The kubelet mounted it at its sizeLimit and evicts the pod at
// once when use passes that, so the guard never grows it past the sizeLimit the webhook wrote
// in GPU_RUN_SHM_LIMIT; nor does it lower it to the plan (GPU_RUN_SHM_SIZE): an unwritten tmpfs
// costs nothing, and a pod lowered would keep the plan whenever the guard is not running.
// Another emptyDir is never grown past the size it has. Returns the words for the note.
std::string empty_dir_limits(const ContainerInfo& c, GuardLimits& limits) {
  const auto env_size = [&c](const char* name) -> std::uint64_t {
    const auto it = c.env.find(name);
    if (it == c.env.end()) return 0;
    try {
      return parse_size(it->second.substr(0, 64), name);
    } catch (const Error&) {
      return 0;
    }
  };
  limits.size_limit = env_size(kEnvShmLimit);
  if (!limits.size_limit) {
    if (const auto now = shm_usage_of_pid(c.pid)) limits.size_limit = now->size;
    return "; a memory-backed emptyDir without " + std::string(kEnvShmLimit) + ", never grown past its " +
           format_size(limits.size_limit) + " (the kubelet would evict the pod past its sizeLimit)";
  }
  return "; a memory-backed emptyDir (the plan " + format_size(env_size(kEnvShmSize)) +
         "), never made smaller, grown up to its sizeLimit " + format_size(limits.size_limit) +
         ", never past (the kubelet would evict the pod)";
}

// Docker's and podman's containers are asked of their engine once, when their pid is known: a
// Docker task's spec has no name or labels, and podman's pid file is not where its bundle is. The
// pid file comes before the start: should the engine still say "created" (both answered "running",
// their inspect waiting for the start, on this machine), the pid is the task's. nullopt, quietly,
// when the engine no longer knows it (removed since it started, most often) or, without --all, for
// one gpu-run did not size (their polled `ps --filter label=` never listed those either).
std::optional<ContainerInfo> inspected_task(const std::string& engine, const TaskEvent& ev, bool all) {
  ContainerInfo c;
  try {
    c = inspect_container(engine, ev.id);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  c.engine = engine;
  if (!c.running && c.status == "created" && ev.pid > 0) {
    c.pid = ev.pid;
    c.running = true;
  }
  if (!all && !c.labels.count(kLabelProfile) && !c.labels.count(kLabelShmSize)) return std::nullopt;
  return c;
}

// An engine's containers, watched (task_watch.hpp): a container is published as soon as its
// runtime has written its pid. containerd's own (pods) are read from their spec; Docker's (the
// moby namespace) and podman's are inspected once. Each turn of the loop, however it ends, is a
// pass of the discovery.
void watch_tasks(TaskWatcher& watcher, const GuardOptions& o, const Config& config, Roster& roster,
                 GuardProgress& progress) {
  const fs::path& root = watcher.layout().root;
  const std::string& engine = watcher.layout().engine;
  ProfileStore store(profile_search_path({}, config, /*include_user=*/false));
  const auto load = [&store](const std::string& name) { return store.load(name, /*allow_path=*/false); };
  std::set<std::string> running;
  for (bool first = true; !roster.wait_stopped(std::chrono::milliseconds(0));
       first = false, progress.discovered(GuardInstant::now(), kWatchEvery)) {
    std::vector<TaskEvent> events;
    try {
      events = watcher.wait(kWatchEvery, roster.stopped_fd());
    } catch (const Error& e) {
      print_warning("gpu-run-ctl", std::string("guard: ") + e.what());
      roster.wait_stopped(std::chrono::milliseconds(1000));
      continue;
    }
    if (events.empty() && !first) continue;
    std::vector<Found> found;
    for (const TaskEvent& ev : events) {
      if (!ev.started) {
        running.erase(ev.id);
        continue;
      }
      running.insert(ev.id);
      std::string why;
      std::optional<ContainerInfo> c;
      if (engine == "podman")
        c = inspected_task("podman", ev, o.all);
      else if (engine == "docker" || ev.ns == "moby")
        c = inspected_task("docker", ev, o.all);
      else
        c = task_container(root, ev, why);
      if (!c) {
        if (!why.empty() && why != "a pod's sandbox container")
          print_line("gpu-run-ctl: guard: not guarding task " + ev.ns + "/" + ev.id.substr(0, 12) + ": " + why);
        continue;
      }
      Found f{std::move(*c), {}, {}, {}};
      const std::string skip = guard_skip_reason(f.info, o.all);
      if (!skip.empty()) {
        print_line("gpu-run-ctl: guard: not guarding container " + display_name(f.info) + " (" + short_id(f.info) +
                   "): " + skip);
        continue;
      }
      f.limits = container_guard_limits(f.info, config, load, &f.note);
      if (f.info.labels.count(kLabelEmptyDir)) f.note += empty_dir_limits(f.info, f.limits);
      found.push_back(std::move(f));
    }
    roster.publish(std::move(found), running);
  }
}

// Docker's or podman's container directories, watched; nullptr, after a warning unless `quiet`,
// when they cannot be found or watched: the guard polls the engine's CLI then.
std::unique_ptr<TaskWatcher> engine_watcher(const std::string& engine, bool quiet) {
  std::string why;
  try {
    const std::optional<TaskLayout> layout =
        engine == "docker" ? docker_layout(process_env("DOCKER_HOST").value_or(""), why) : podman_layout(why);
    if (layout) {
      auto watcher = std::make_unique<TaskWatcher>(*layout);
      std::string where = layout->root.string();
      for (const std::string& ns : layout->namespaces) where += ", containerd namespace " + ns;
      print_line("gpu-run-ctl: guard: watching " + engine + "'s containers as they start (" + where + ")");
      return watcher;
    }
  } catch (const Error& e) {
    why = e.what();
  }
  if (!quiet)
    print_warning("gpu-run-ctl", "guard: cannot watch " + engine + "'s containers as they start (" + why +
                                     "): polling `" + engine +
                                     " ps` every 2 s until it can, which misses shorter-lived ones");
  return nullptr;
}

struct Guarded {
  ContainerInfo info;
  std::unique_ptr<ShmGuard> guard;
  std::string profile;             // its metrics' label: what gpu-run recorded, read once
  std::unique_ptr<ShmHandle> shm;  // its /dev/shm, held open while it is guarded
  GuardLimits limits;
  std::string note;
  std::uint64_t start_time = 0;  // its process's, from /proc/<pid>/stat: the same process, not a reused pid
};

// Field 22 of /proc/<pid>/stat, the process's start time in clock ticks after boot; 0 when unread.
std::uint64_t process_start_time(int pid) {
  try {
    const std::string stat = read_small_file("/proc/" + std::to_string(pid) + "/stat", 4096, "the process's stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // after "(comm) "
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i)
      if (i == 22) return std::stoull(field);
  } catch (const std::exception&) {
  }
  return 0;
}

// What the guard guards, kept where a restarted guard reads it before its first look at the
// engine (kNodeGuardStatePath), so a restart leaves no container unguarded while the new guard
// asks the engine (a docker ps and an inspect took 70-105 ms on CI's machine). Each container's
// id, name, engine, pid and its process's start time, the limits and the note.
std::string guard_state(const std::map<std::string, Guarded>& guarded) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [id, g] : guarded) {
    const GuardLimits& l = g.limits;
    out.push_back({{"id", id},
                   {"name", g.info.name},
                   {"engine", g.info.engine},
                   {"pid", g.info.pid},
                   {"start_time", g.start_time},
                   {"profile", g.profile},
                   {"note", g.note},
                   {"labels", g.info.labels},
                   {"limits",
                    {{"headroom", l.headroom},
                     {"bound", l.bound},
                     {"batch", l.batch},
                     {"max_shm", l.max_shm},
                     {"size_limit", l.size_limit},
                     {"budget_bytes", l.budget_bytes ? nlohmann::json(*l.budget_bytes) : nlohmann::json()}}}});
  }
  return out.dump();
}

// The containers of the last guard's state whose process is still the one it guarded.
std::vector<Found> resumed_from_state() {
  std::vector<Found> out;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_small_file(kNodeGuardStatePath, 4 << 20, "the guard's state"));
  } catch (const std::exception&) {
    return out;  // none yet, or unreadable: the first poll finds them
  }
  if (!doc.is_array()) return out;
  for (const auto& e : doc) {
    try {
      Found f;
      f.info.id = e.at("id").get<std::string>();
      f.info.name = e.at("name").get<std::string>();
      f.info.engine = e.at("engine").get<std::string>();
      f.info.pid = e.at("pid").get<int>();
      f.info.labels = e.at("labels").get<std::map<std::string, std::string>>();
      f.info.running = true;
      const auto start = e.at("start_time").get<std::uint64_t>();
      if (f.info.id.empty() || f.info.pid <= 0 || start == 0 || process_start_time(f.info.pid) != start) continue;
      const auto& l = e.at("limits");
      f.limits.headroom = l.at("headroom").get<std::uint64_t>();
      f.limits.bound = l.at("bound").get<std::uint64_t>();
      f.limits.batch = l.at("batch").get<std::uint64_t>();
      f.limits.max_shm = l.at("max_shm").get<std::uint64_t>();
      f.limits.size_limit = l.value("size_limit", std::uint64_t{0});
      if (!l.at("budget_bytes").is_null()) f.limits.budget_bytes = l.at("budget_bytes").get<std::uint64_t>();
      constexpr std::string_view kResumed = "; resumed from the last guard";
      f.note = e.at("note").get<std::string>();
      if (f.note.size() < kResumed.size() || f.note.compare(f.note.size() - kResumed.size(), kResumed.size(), kResumed))
        f.note += kResumed;
      f.profile = e.at("profile").get<std::string>();
      out.push_back(std::move(f));
    } catch (const std::exception&) {
      continue;  // a malformed entry: that container is found by the first poll
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> guard_ps_commands(const std::string& engine, bool all) {
  if (all) return {{engine, "ps", "-q", "--no-trunc"}};
  std::vector<std::vector<std::string>> out;
  for (const char* label : {kLabelProfile, kLabelShmSize})
    out.push_back({engine, "ps", "-q", "--no-trunc", "--filter", std::string("label=") + label});
  return out;
}

std::string guard_skip_reason(const ContainerInfo& c, bool all) {
  if (!c.running || c.pid <= 0) return "not running";
  if (!all && !c.labels.count(kLabelProfile) && !c.labels.count(kLabelShmSize))
    return std::string("no ") + kLabelProfile + " or " + kLabelShmSize + " label (--all guards it)";
  const IpcKind ipc = parse_ipc_mode(c.ipc_mode).kind;
  if (ipc != IpcKind::kPrivate && ipc != IpcKind::kShareable)
    return "--ipc " + c.ipc_mode.substr(0, 80) + ": no /dev/shm of its own to grow";
  return "";
}

std::string guard_start_line(const std::string& engine, bool all) {
  return all ? "guarding every running " + engine + " container"
             : "guarding the " + engine + " containers gpu-run sized";
}

std::optional<GuardPlanInputs> guard_plan_inputs(const ContainerInfo& c, const Config& config) {
  // What gpu-run recorded, read and parsed by core's one adapter, as every door's request is.
  const ContainerRequest recorded = recorded_request(c.env, c.labels);
  if (!recorded.profile || !recorded.workers || !recorded.batch_size) return std::nullopt;
  SpecFacts spec;
  spec.memory_limit = c.memory_limit;
  try {
    GuardPlanInputs in;
    in.profile = *recorded.profile;
    in.request = sizing_request(recorded, spec, HostFacts{}, config);
    if (in.request.workers.value_or(0) == 0) return std::nullopt;
    in.workers = *in.request.workers;
    in.batch_size = in.request.batch_size.value_or(0);
    in.gpus = in.request.gpus;
    return in;
  } catch (const Error&) {
    return std::nullopt;
  }
}

GuardLimits container_guard_limits(const ContainerInfo& c, const Config& config,
                                   const std::function<Profile(const std::string&)>& load_profile, std::string* note) {
  std::string why_not;
  if (const auto in = guard_plan_inputs(c, config)) {
    try {
      const ShmPlan plan = plan_shm(load_profile(in->profile), in->request);
      const GuardLimits limits = guard_limits(plan);
      if (limits.headroom) {
        if (note)
          *note = "keeps " + format_size(limits.headroom) + " free (profile " + in->profile + ", " +
                  (in->gpus > 1 ? std::to_string(in->gpus) + " GPUs x " : "") + std::to_string(in->workers) +
                  " workers x a batch of " + std::to_string(in->batch_size) + ")" +
                  (limits.bound ? ", one batch near the plan's " + format_size(limits.bound) : "");
        return limits;
      }
      why_not = "the plan has no batch bytes";
    } catch (const Error& e) {
      why_not = e.what();
    }
  } else if (const std::string profile = recorded_request(c.env, c.labels).profile.value_or(""); !profile.empty()) {
    // A profile without workers and batch size cannot be planned, but a name no store knows is
    // still worth a word: the container asked for something that does not exist.
    try {
      load_profile(profile);
      why_not = "profile " + profile.substr(0, 80) + ", but no " + kEnvNumWorkers + " and " + kEnvBatchSize +
                " in its environment";
    } catch (const Error& e) {
      why_not = std::string("its profile cannot be used: ") + e.what();
    }
  } else {
    why_not = "no profile, workers and batch size in its environment";
  }
  GuardLimits limits;
  if (c.memory_limit && *c.memory_limit > 0)
    limits.budget_bytes = MemoryBudget{*c.memory_limit, config.memory_fraction_max}.bytes();
  if (note)
    *note = "keeps " + std::to_string(static_cast<int>(config.guard.min_free_fraction * 100 + 0.5)) + "% free (" +
            why_not + ")";
  return limits;
}

void run_guard(const GuardOptions& o) {
  const std::uint64_t interval = parse_count(o.interval_ms, "--interval", 60000);
  if (interval == 0) throw usage_error("--interval 0: expected milliseconds between samples, 1 to 60000");
  if (o.metrics_public && !o.metrics) throw usage_error("--metrics-public: give --metrics ADDR too");
  const std::optional<MetricsAddress> address =
      o.metrics ? std::optional(parse_metrics_address(*o.metrics, o.metrics_public)) : std::nullopt;
  const Config config = load_ctl_config();
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
  Roster roster;
  // containerd's task directory is checked before the guard says it runs: a wrong
  // --containerd-state is an error at start, not a guard that never sees a container.
  std::unique_ptr<TaskWatcher> watcher =
      engine == "containerd" ? std::make_unique<TaskWatcher>(fs::path(o.containerd_state) / kContainerdTaskDir)
                             : nullptr;
  std::thread poller([&] {
    // Docker's and podman's directories are looked for here, while the containers the last guard
    // guarded are resumed (a `podman info`, or a look through /proc, takes tens of ms).
    if (!watcher) watcher = engine_watcher(engine, /*quiet=*/false);
    // The CLI until they can be found (the engine started after the guard, most often).
    if (!watcher)
      poll_engine(engine, o, config, roster, progress,
                  [&] { return (watcher = engine_watcher(engine, /*quiet=*/true)) != nullptr; });
    if (watcher) watch_tasks(*watcher, o, config, roster, progress);
  });

  std::map<std::string, Guarded> guarded;
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
    auto guard = std::make_unique<ShmGuard>(config.guard, f.limits, config,
                                            "gpu-run-ctl: guard: container " + display_name(f.info));
    const std::string id = f.info.id;
    std::string profile =
        !f.profile.empty() ? f.profile : recorded_request(f.info.env, f.info.labels).profile.value_or("");
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
      ShmGuard& guard = *it->second.guard;
      const unsigned growths_before = guard.growths();
      try {
        guard.on_sample(c.pid, c.id, *usage);
      } catch (const std::exception& e) {
        print_warning("gpu-run-ctl", "guard: container " + display_name(c) + ": " + e.what());
      }
      if (server) {
        // After a growth the sample is stale: the size is read again.
        const ShmUsage now = guard.growths() != growths_before ? it->second.shm->sample().value_or(*usage) : *usage;
        metrics.update({c.id, c.name, it->second.profile, c.engine, label_of(c, kCriSandboxNamespace),
                        label_of(c, kCriSandboxName), now.size, now.used, std::max(now.used, usage->used),
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

void add_guard_command(CLI::App& app) {
  auto o = std::make_shared<GuardOptions>();
  CLI::App* cmd = app.add_subcommand(
      "guard", "Grow the /dev/shm of every running container gpu-run sized before it fills, until SIGTERM");
  cmd->footer(kGuardFooter);
  cmd->add_option("--engine", o->engine,
                  "docker, podman or containerd (default: the config's engine); each one's containers are seen "
                  "as they start, in the directories its runtime writes their pids into (containerd's: "
                  "Kubernetes' pods and Docker's containers)")
      ->type_name("ENGINE");
  cmd->add_option("--containerd-state", o->containerd_state,
                  "containerd's state directory, where --engine containerd watches its tasks (default /run/containerd)")
      ->type_name("DIR");
  cmd->add_flag("--all", o->all, "Guard every running container, not only those gpu-run sized");
  cmd->add_option("--interval", o->interval_ms, "Milliseconds between samples of each container (default 10)")
      ->type_name("MS");
  cmd->add_option("--metrics", o->metrics,
                  "Serve Prometheus metrics (and /healthz, /readyz) at ADDR: 127.0.0.1:PORT, [::1]:PORT or unix:/PATH")
      ->type_name("ADDR");
  cmd->add_flag("--metrics-public", o->metrics_public, "Allow --metrics on a non-loopback address (plain HTTP)");
  cmd->callback([o] { run_guard(*o); });
}

}  // namespace gpurun
