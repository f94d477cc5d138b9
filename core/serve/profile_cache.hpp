#pragma once

// A long-running door's profiles (gpu-run-webhook): a preloaded ProfileStore reused while the
// profile directories are unchanged and rebuilt when any of them changes, so a review reads no
// profile file and an updated ConfigMap (kubelet swaps its `..data` symlink) still takes effect
// without a restart. docs/ARCHITECTURE.md, "Profiles".

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "profiles/profile_store.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// What stat(2), following symlinks, says of one path a profile lookup depends on.
struct PathStamp {
  fs::path path;
  int error = 0;  // errno of stat, 0 when it succeeded (ENOENT: absent, which is a state too)
  dev_t dev = 0;
  ino_t ino = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  off_t size = 0;
  mode_t mode = 0;  // the file type too: a file replaced by a directory is a change
};

bool operator==(const PathStamp& a, const PathStamp& b);
inline bool operator!=(const PathStamp& a, const PathStamp& b) { return !(a == b); }

// The stamps of everything the profiles under `dirs` are read from: each directory, its `..data`
// (a ConfigMap volume's current target), each entry of it and of its team subdirectories. Any
// edit, added or removed file, or symlink swap changes them (an in-place rewrite to the same size
// within one tick of the filesystem's clock is the one change it can miss).
std::vector<PathStamp> profile_dirs_stamps(const std::vector<fs::path>& dirs);

// The loaded profile store for a server's many threads: current() returns an immutable,
// preloaded store, checked against profile_dirs_stamps at most once per `check_interval`
// (0: on every call) and rebuilt when the stamps differ.
class ProfileCache {
 public:
  ProfileCache(std::vector<fs::path> dirs, std::chrono::milliseconds check_interval);

  // The store to use for one request; thread-safe. The store stays valid while it is held.
  std::shared_ptr<const ProfileStore> current();

  const std::vector<fs::path>& dirs() const { return dirs_; }

  // How many times the store was built (1 after construction): the unit tests' count of reads.
  std::uint64_t builds() const;

 private:
  std::shared_ptr<const ProfileStore> build(const std::vector<PathStamp>& stamps);

  const std::vector<fs::path> dirs_;
  const std::chrono::milliseconds check_interval_;
  mutable std::mutex mutex_;  // guards the members below
  std::shared_ptr<const ProfileStore> store_;
  std::vector<PathStamp> stamps_;
  std::chrono::steady_clock::time_point next_check_;
  std::uint64_t builds_ = 0;
};

}  // namespace gpurun
