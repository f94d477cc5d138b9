#include "serve/profile_cache.hpp"

#include <errno.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

namespace gpurun {
namespace {

std::int64_t nanoseconds(const timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

PathStamp stamp(const fs::path& path) {
  PathStamp s;
  s.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    s.error = errno;
    return s;
  }
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.mtime_ns = nanoseconds(st.st_mtim);
  s.ctime_ns = nanoseconds(st.st_ctim);
  s.size = st.st_size;
  s.mode = st.st_mode;
  return s;
}

// The entries of `dir` by name, sorted (readdir's order is the filesystem's), without `.`-names:
// a ConfigMap's `..data` and `..2026_...` directories are reached through the symlinks.
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().front() != '.') out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool operator==(const PathStamp& a, const PathStamp& b) {
  return a.path == b.path && a.error == b.error && a.dev == b.dev && a.ino == b.ino && a.mtime_ns == b.mtime_ns &&
         a.ctime_ns == b.ctime_ns && a.size == b.size && a.mode == b.mode;
}

std::vector<PathStamp> profile_dirs_stamps(const std::vector<fs::path>& dirs) {
  std::vector<PathStamp> out;
  for (const fs::path& dir : dirs) {
    out.push_back(stamp(dir));
    if (out.back().error != 0) continue;
    out.push_back(stamp(dir / "..data"));
    for (const fs::path& entry : entries(dir)) {
      out.push_back(stamp(entry));
      if (!S_ISDIR(out.back().mode)) continue;
      for (const fs::path& sub : entries(entry)) out.push_back(stamp(sub));
    }
  }
  return out;
}

ProfileCache::ProfileCache(std::vector<fs::path> dirs, std::chrono::milliseconds check_interval)
    : dirs_(std::move(dirs)), check_interval_(check_interval) {
  std::lock_guard<std::mutex> lock(mutex_);
  store_ = build(profile_dirs_stamps(dirs_));
  next_check_ = std::chrono::steady_clock::now() + check_interval_;
}

std::shared_ptr<const ProfileStore> ProfileCache::current() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (check_interval_.count() > 0 && now < next_check_) return store_;
  // The stamps are taken before the files are read: a change during the build is seen next time.
  std::vector<PathStamp> stamps = profile_dirs_stamps(dirs_);
  if (stamps != stamps_) store_ = build(stamps);
  next_check_ = now + check_interval_;
  return store_;
}

std::uint64_t ProfileCache::builds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return builds_;
}

std::shared_ptr<const ProfileStore> ProfileCache::build(const std::vector<PathStamp>& stamps) {
  auto store = std::make_shared<ProfileStore>(dirs_);
  store->preload();
  stamps_ = stamps;
  ++builds_;
  return store;
}

}  // namespace gpurun
