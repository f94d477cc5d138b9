#pragma once

// One remount of a container's /dev/shm in flight: the helper (shm_remount.hpp) started through
// spawn, its output read without blocking, killed at its deadline. The guard's sampling loop
// polls it with every sample, so a helper that hangs stalls that one container's growth, never
// the loop (docs/ARCHITECTURE.md, "Remounting a running container").

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "base/fd.hpp"
#include "base/process.hpp"
#include "shm/shm_remount.hpp"

namespace gpurun {

class RemountJob {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts `helper --remount ...`. Throws Error when it cannot start.
  RemountJob(const std::filesystem::path& helper, const RemountRequest& request,
             std::chrono::milliseconds deadline = kRemountDeadline);

  // Never blocks: nullopt while the helper runs; its outcome once it has exited, or an error
  // once the deadline has passed (the helper is killed).
  std::optional<RemountOutcome> poll() { return step(0); }

  // Blocks until the helper has exited or the deadline has passed.
  RemountOutcome wait();

  // Reaps the helpers killed at their deadline that had not exited 20 ms later (a loaded machine,
  // or a helper in the kernel): every step calls it, so a zombie lives until the next remount's
  // first poll at most. Returns how many are still unreaped.
  static std::size_t reap_killed();

 private:
  std::optional<RemountOutcome> step(int timeout_ms);
  void read_available(int timeout_ms);

  std::string helper_;
  Clock::time_point deadline_;
  std::chrono::milliseconds allowed_;
  UniqueFd out_;
  UniqueFd err_;
  std::string out_text_;
  std::string err_text_;
  Child child_;
};

}  // namespace gpurun
