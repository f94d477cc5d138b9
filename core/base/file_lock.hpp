#pragma once

#include <string>

#include "base/fd.hpp"

namespace gpurun {

// An exclusive flock(2) on a lock file, held until destroyed (or the process ends: the kernel
// drops it with the last descriptor, so a killed holder never leaves it locked). The holder
// removes the file when it lets go, so locks of containers long gone do not pile up; a waiter
// that then gets the lock on the removed file sees that the path no longer names it and opens
// the path again (the usual unlink-while-locked protocol).
class FileLock {
 public:
  // Creates `path` (mode 0600) and its missing parent directories (0700) and locks it, waiting
  // for another holder unless `wait` is false; `locked()` says whether it got it. Throws Error
  // naming the path when the file cannot be made or locked.
  FileLock(const std::string& path, bool wait);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool locked() const { return locked_; }
  // Waits for the lock when the constructor did not wait or failed to get it.
  void wait();

 private:
  // Opens the path and flocks it (waiting or not) until the locked file is the one the path
  // names; false when not waiting and another process holds it.
  bool acquire(bool wait);

  std::string path_;
  UniqueFd fd_;
  bool locked_ = false;
};

// Where the changes of one container's /dev/shm take turns (gpu-run-ctl resize waits for the
// lock, the guard skips a sample while another holds it): a lock file per container id.
inline constexpr const char* kShmLockDir = "/run/gpu-run/resize";
std::string shm_lock_path(const std::string& container_id);

}  // namespace gpurun
