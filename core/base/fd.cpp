#include "base/fd.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <random>

#include "base/error.hpp"

namespace gpurun {

void close_fd(int fd) { ::close(fd); }

namespace {

constexpr int kTooLarge = -1;

// Reads `fd` to EOF into `out`: 0, the read's errno, or kTooLarge past `max_bytes`.
int read_to_eof(int fd, std::size_t max_bytes, std::string& out) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) return kTooLarge;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

Error read_error(const std::string& what, std::size_t max_bytes, int err) {
  if (err == kTooLarge)
    return Error(what + ": more than " + std::to_string(max_bytes) + " bytes, refusing to read further");
  return system_error(what + ": read", err);
}

}  // namespace

std::string read_bounded(int fd, std::size_t max_bytes, const std::string& what) {
  std::string out;
  if (const int err = read_to_eof(fd, max_bytes, out)) throw read_error(what, max_bytes, err);
  return out;
}

OrWhy<std::string> read_bounded_or_why(int fd, std::size_t max_bytes, const std::string& what) {
  std::string out;
  if (const int err = read_to_eof(fd, max_bytes, out))
    return OrWhy<std::string>::none(read_error(what, max_bytes, err).what());
  return out;
}

void write_all(int fd, const std::string& data, const std::string& what) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw system_error(what + ": write", errno);
    }
    done += static_cast<std::size_t>(n);
  }
}

void write_file_atomic(const std::string& path, const std::string& data, unsigned mode, Durability durability,
                       std::optional<FileOwner> owner) {
  std::string dir = ".";
  auto slash = path.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + ".gpu-run-tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) throw system_error("write " + path + ": create " + tmp, errno);
  try {
    write_all(fd.get(), data, "write " + tmp);
    // chown before chmod: chown clears set-id bits.
    if (owner && ::fchown(fd.get(), owner->uid, owner->gid) != 0) throw system_error("chown " + tmp, errno);
    if (::fchmod(fd.get(), mode) != 0) throw system_error("chmod " + tmp, errno);
    if (durability == Durability::kDurable && ::fsync(fd.get()) != 0) throw system_error("fsync " + tmp, errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fd = UniqueFd();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw system_error("write " + path + ": rename", err);
  }
  if (durability == Durability::kVolatile) return;
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd) ::fsync(dfd.get());
}

// How many times a walk that raced a rename or a mount is tried again.
constexpr int kOpenat2Retries = 128;

int open_dir_in_root(int rootfd, const char* path, Resolve resolve) {
  const bool no_symlinks = resolve == Resolve::kNoSymlinks;
  const int flags = (no_symlinks ? O_PATH | O_NOFOLLOW : O_RDONLY) | O_DIRECTORY | O_CLOEXEC;
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (no_symlinks ? RESOLVE_NO_SYMLINKS : 0);
  // RESOLVE_IN_ROOT fails a ".." with EAGAIN when a rename or a mount anywhere on the host raced
  // the walk ("the caller may choose to retry", openat2(2)); a busy node renames and mounts all
  // the time (shm_mount_probes_test's renamer made 20000 walks fail without the retry).
  long fd = -1;
  for (int attempt = 0; attempt < kOpenat2Retries; ++attempt) {
    fd = ::syscall(SYS_openat2, rootfd, path, &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN) break;
  }
  if (fd < 0 && errno == ENOSYS) fd = ::openat(rootfd, path, flags | O_NOFOLLOW);
  return static_cast<int>(fd);
}

}  // namespace gpurun
