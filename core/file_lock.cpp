#include "file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <filesystem>

#include "error.hpp"

namespace gpurun {

FileLock::FileLock(const std::string& path, bool wait) : path_(path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && std::filesystem::create_directories(parent, ec))
    std::filesystem::permissions(parent, std::filesystem::perms::owner_all, ec);
  if (ec) throw system_error("create the lock directory " + parent.string(), ec.value());
  fd_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd_) throw system_error("open the lock file " + path, errno);
  int r;
  while ((r = ::flock(fd_.get(), LOCK_EX | (wait ? 0 : LOCK_NB))) != 0 && errno == EINTR) {
  }
  if (r == 0) {
    locked_ = true;
  } else if (errno != EWOULDBLOCK) {
    throw system_error("lock " + path, errno);
  }
}

std::string shm_lock_path(const std::string& container_id) {
  return std::string(kShmLockDir) + "/" + container_id.substr(0, 64) + ".lock";
}

void FileLock::wait() {
  if (locked_) return;
  int r;
  while ((r = ::flock(fd_.get(), LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (r != 0) throw system_error("lock " + path_, errno);
  locked_ = true;
}

}  // namespace gpurun
