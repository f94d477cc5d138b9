#include "base/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "base/error.hpp"

namespace gpurun {

FileLock::FileLock(const std::string& path, bool wait) : path_(path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && std::filesystem::create_directories(parent, ec))
    std::filesystem::permissions(parent, std::filesystem::perms::owner_all, ec);
  if (ec) throw system_error("create the lock directory " + parent.string(), ec.value());
  locked_ = acquire(wait);
}

FileLock::~FileLock() {
  // Removed while still locked: a process that opened it meanwhile finds it unlinked once it
  // gets the lock, and starts over on a new file.
  if (locked_) ::unlink(path_.c_str());
}

bool FileLock::acquire(bool wait) {
  for (;;) {
    if (!fd_) {
      fd_ = UniqueFd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
      if (!fd_) throw system_error("open the lock file " + path_, errno);
    }
    int r;
    while ((r = ::flock(fd_.get(), LOCK_EX | (wait ? 0 : LOCK_NB))) != 0 && errno == EINTR) {
    }
    if (r != 0) {
      if (errno == EWOULDBLOCK) return false;
      throw system_error("lock " + path_, errno);
    }
    struct stat held {
    }, named{};
    if (::fstat(fd_.get(), &held) == 0 && ::lstat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino)
      return true;
    fd_ = UniqueFd();  // the previous holder removed it: lock the path's file anew
  }
}

std::string shm_lock_path(const std::string& container_id) {
  return std::string(kShmLockDir) + "/" + container_id.substr(0, 64) + ".lock";
}

void FileLock::wait() {
  if (!locked_) locked_ = acquire(true);
}

}  // namespace gpurun
