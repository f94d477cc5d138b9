#include "guard/guard_orphans.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "shm/shm_mount.hpp"
#include "shm/shm_orphans.hpp"

namespace gpurun {

std::optional<std::uint64_t> orphaned_bytes_of_pid(int pid, int proc_fd, std::time_t min_age) {
  try {
    const std::string root_path = "/proc/" + std::to_string(pid) + "/root";
    UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return std::nullopt;
    const ShmProbe p = probe_shm_dir(root.get(), Resolve::kNoSymlinks, root_path + "/dev/shm");
    if (p.error) return std::nullopt;
    UniqueFd dir(::openat(p.dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return std::nullopt;
    // Most /dev/shm hold no engine's segment old enough to be an orphan: then no walk of /proc.
    const std::vector<ShmSegment> segments = list_segments(dir.get(), root_path + "/dev/shm");
    const std::time_t now = std::time(nullptr);
    if (classify_segments(segments, {}, now, min_age).orphans.empty()) return 0;
    const Holders holders = scan_holders(proc_fd, p.fs.st.st_dev);
    return classify_segments(segments, holders.inodes, now, min_age).orphan_bytes();
  } catch (const Error&) {
    return std::nullopt;
  }
}

OrphanScanner::OrphanScanner(GuardMetrics& metrics, std::chrono::milliseconds every, std::time_t min_age)
    : metrics_(metrics), every_(every), min_age_(min_age), thread_([this] { run(); }) {}

OrphanScanner::~OrphanScanner() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void OrphanScanner::track(const std::string& id, int pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  tracked_[id] = pid;
}

void OrphanScanner::untrack(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  tracked_.erase(id);
}

unsigned OrphanScanner::passes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return passes_;
}

void OrphanScanner::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, every_, [this] { return stop_; })) {
    const std::map<std::string, int> tracked = tracked_;
    lock.unlock();
    UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (proc) {
      for (const auto& [id, pid] : tracked)
        if (const auto bytes = orphaned_bytes_of_pid(pid, proc.get(), min_age_)) metrics_.set_orphaned(id, *bytes);
    }
    lock.lock();
    ++passes_;
  }
}

}  // namespace gpurun
