#include "guard/discovery.hpp"

#include <sstream>

#include "base/env.hpp"
#include "base/error.hpp"
#include "base/process.hpp"
#include "base/program.hpp"
#include "base/stop_signal.hpp"
#include "guard/engine_layout.hpp"
#include "oci/container.hpp"

namespace gpurun {
namespace {

// The one admission step (container_admission.hpp), and the line for a container it passes over.
std::optional<Found> admitted(ContainerInfo c, const AdmissionContext& admission) {
  const std::string name = display_name(c), id = short_id(c);
  OrWhy<Found> f = admit(std::move(c), admission);
  if (!f) print_line("gpu-run-ctl: guard: not guarding container " + name + " (" + id + "): " + f.why);
  return std::move(f.value);
}

// Lists the candidates every kPollEvery, inspects the new ones (once each) and publishes them,
// a pass of the discovery each time; returns when stopped, or when `can_watch` says the engine's
// directories can be watched now.
void poll_engine(const std::string& engine, const AdmissionContext& admission, Roster& roster, GuardProgress& progress,
                 const GuardClock& clock, const std::function<bool()>& can_watch) {
  const auto commands = guard_ps_commands(engine);
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
          ContainerInfo c = inspect_container(engine, id);
          known.insert(id);
          if (auto f = admitted(std::move(c), admission)) found.push_back(std::move(*f));
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
    progress.discovered(clock.now(), kPollEvery);
    if (roster.wait_stopped(kPollEvery) || can_watch()) return;
  }
}

// Docker's and podman's containers are asked of their engine once, when their pid is known: a
// Docker task's spec has no name or labels, and podman's pid file is not where its bundle is. The
// pid file comes before the start: should the engine still say "created" (both answered "running",
// their inspect waiting for the start, on this machine), the pid is the task's. The spec's
// annotations (the runtime's decision record) are read from the task's bundle. nullopt, quietly,
// when the engine no longer knows it (removed since it started, most often).
std::optional<ContainerInfo> inspected_task(const std::string& engine, const TaskLayout& layout, const TaskEvent& ev) {
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
  for (auto& [k, v] : bundle_annotations(task_bundle(layout, ev))) c.annotations[k] = std::move(v);
  return c;
}

// An engine's containers, watched (task_watch.hpp): a container is published as soon as its
// runtime has written its pid. containerd's own (pods) are read from their spec; Docker's (the
// moby namespace) and podman's are inspected once. Each turn of the loop, however it ends, is a
// pass of the discovery.
void watch_tasks(TaskWatcher& watcher, const AdmissionContext& admission, Roster& roster, GuardProgress& progress,
                 const GuardClock& clock) {
  const fs::path& root = watcher.layout().root;
  const std::string& engine = watcher.layout().engine;
  std::set<std::string> running;
  for (bool first = true; !roster.wait_stopped(std::chrono::milliseconds(0));
       first = false, progress.discovered(clock.now(), kWatchEvery)) {
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
      if (engine == "podman") {
        c = inspected_task("podman", watcher.layout(), ev);
      } else if (engine == "docker" || ev.ns == "moby") {
        c = inspected_task("docker", watcher.layout(), ev);
      } else {
        OrWhy<ContainerInfo> task = task_container(root, ev);
        c = std::move(task.value);
        why = std::move(task.why);
      }
      if (!c) {
        if (!why.empty() && why != kSandboxContainer)
          print_line("gpu-run-ctl: guard: not guarding task " + ev.ns + "/" + ev.id.substr(0, 12) + ": " + why);
        continue;
      }
      if (auto f = admitted(std::move(*c), admission)) found.push_back(std::move(*f));
    }
    roster.publish(std::move(found), running);
  }
}

// Docker's or podman's container directories, watched; nullptr, after a warning unless `quiet`,
// when they cannot be found or watched: the guard polls the engine's CLI then.
std::unique_ptr<TaskWatcher> engine_watcher(const std::string& engine, bool quiet) {
  std::string why;
  try {
    const OrWhy<TaskLayout> layout =
        engine == "docker" ? docker_layout(process_env("DOCKER_HOST").value_or("")) : podman_layout();
    why = layout.why;
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

}  // namespace

std::vector<std::vector<std::string>> guard_ps_commands(const std::string& engine) {
  // Every container: which ones gpu-run sized is the admission's to say (a record in a spec
  // annotation or the hook's file, or GPU_RUN_* in the environment, is no label to filter by).
  return {{engine, "ps", "-q", "--no-trunc"}};
}

void discover(const std::string& engine, const AdmissionContext& admission, Roster& roster, GuardProgress& progress,
              const GuardClock& clock, std::unique_ptr<TaskWatcher>& watcher) {
  // Docker's and podman's directories are looked for here, while the containers the last guard
  // guarded are resumed (a `podman info`, or a look through /proc, takes tens of ms).
  if (!watcher) watcher = engine_watcher(engine, /*quiet=*/false);
  // The CLI until they can be found (the engine started after the guard, most often).
  if (!watcher)
    poll_engine(engine, admission, roster, progress, clock,
                [&] { return (watcher = engine_watcher(engine, /*quiet=*/true)) != nullptr; });
  if (watcher) watch_tasks(*watcher, admission, roster, progress, clock);
}

}  // namespace gpurun
