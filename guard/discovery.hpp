#pragma once

// How the node guard finds the containers to guard: a watch of the directories each engine's
// runtime writes a container's pid into (task_watch.hpp, engine_layout.hpp), or, until those can
// be found, a poll of `<engine> ps`; each container found goes through the one admission step
// (container_admission.hpp) and is handed to the sampler through a Roster.

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/fd.hpp"
#include "guard/container_admission.hpp"
#include "guard/guard_health.hpp"
#include "guard/task_watch.hpp"

namespace gpurun {

// How often the engine is asked which containers run.
constexpr auto kPollEvery = std::chrono::milliseconds(2000);
// How long the watch waits for its directories' events before it makes another pass.
constexpr auto kWatchEvery = std::chrono::milliseconds(100);

// A running container the discovery found worth guarding (container_admission.hpp).
using Found = Admitted;

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

// The `<engine> ps -q` command that lists the candidates when the engine's directories cannot be
// watched: every running container (the admission says which are guarded).
std::vector<std::vector<std::string>> guard_ps_commands(const std::string& engine);

// The discovery's loop, until the roster is stopped: Docker's and podman's directories are
// looked for (`watcher`, containerd's given), `<engine> ps` polled until they can be watched,
// then watched. Each pass is reported to `progress` at `clock`'s now.
void discover(const std::string& engine, const AdmissionContext& admission, Roster& roster, GuardProgress& progress,
              const GuardClock& clock, std::unique_ptr<TaskWatcher>& watcher);

}  // namespace gpurun
