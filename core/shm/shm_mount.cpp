#include "shm/shm_mount.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/enum_name.hpp"
#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/units.hpp"

namespace gpurun {
namespace {

std::string why_open_failed(int err, const std::string& path) {
  if (err == ELOOP || err == ENOTDIR)
    return path + " in the image is a symlink or not a directory: refusing to follow it (fix the image)";
  if (err == EXDEV) return path + " escapes the container's root: refusing";
  return path + ": " + std::strerror(err);
}

// MS_REMOUNT replaces the per-mount flags: pass back what is there, always with nosuid and nodev.
unsigned long mount_flags(const FsStat& f) {
  unsigned long flags = MS_NOSUID | MS_NODEV;
  if (f.svfs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (f.svfs.f_flag & ST_RDONLY) flags |= MS_RDONLY;
  if (f.svfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (f.svfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (f.svfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

// Mount calls go through the directory fd: fchdir to it and act on ".", so no path the
// image controls is looked up again between the checks and the mount.
void mount_here(int dirfd, const char* source, const char* type, unsigned long flags, const std::string& data,
                const std::string& what) {
  if (::fchdir(dirfd) != 0) throw system_error(what + ": fchdir", errno);
  if (::mount(source, ".", type, flags, data.c_str()) != 0) {
    int err = errno;
    (void)!::chdir("/");
    throw system_error(what, err);
  }
  (void)!::chdir("/");
}

// Sets a mounted tmpfs's size through its superblock alone (fspick + fsconfig, Linux 5.2):
// unlike mount(MS_REMOUNT), it changes no mount's flags and not the superblock's read-only
// state. containerd bind-mounts a pod's tmpfs read-only into the sandbox (pause) container;
// MS_REMOUNT there passes MS_RDONLY to the superblock and would make /dev/shm read-only for
// every container of the pod. False when the kernel (or valgrind) does not know the calls.
bool reconfigure_tmpfs_size(int dirfd, std::uint64_t size, const std::string& what) {
  UniqueFd fc(::fspick(dirfd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC));
  if (!fc) {
    if (errno == ENOSYS) return false;
    throw system_error(what + ": fspick", errno);
  }
  const std::string value = std::to_string(size);
  if (::fsconfig(fc.get(), FSCONFIG_SET_STRING, "size", value.c_str(), 0) != 0)
    throw system_error(what + ": fsconfig", errno);
  if (::fsconfig(fc.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0) throw system_error(what, errno);
  return true;
}

// Grow-only unless a shrink is allowed: whether `size` changes a tmpfs of `before` bytes.
bool resize_wanted(std::uint64_t before, std::uint64_t size, bool allow_shrink) {
  return size > before || (allow_shrink && size < before);
}

}  // namespace

const char* outcome_name(ShmOutcome outcome) {
  static const char* const kNames[] = {"resized", "mounted", "unchanged", "host-shm"};
  return enum_name(outcome, kNames);
}

const char* shm_mount_name(ShmMount mount) {
  static const char* const kNames[] = {"missing", "not-a-mount", "not-tmpfs", "tmpfs"};
  return enum_name(mount, kNames);
}

std::uint64_t FsStat::size() const {
  return static_cast<std::uint64_t>(svfs.f_blocks) * static_cast<std::uint64_t>(svfs.f_frsize);
}

std::uint64_t FsStat::used() const {
  return static_cast<std::uint64_t>(svfs.f_blocks - svfs.f_bfree) * static_cast<std::uint64_t>(svfs.f_frsize);
}

bool FsStat::is_tmpfs() const { return sfs.f_type == TMPFS_MAGIC; }

FsStat stat_fs(int fd, const std::string& what) {
  FsStat f;
  if (::fstat(fd, &f.st) != 0) throw system_error("stat " + what, errno);
  if (::fstatfs(fd, &f.sfs) != 0) throw system_error("statfs " + what, errno);
  if (::fstatvfs(fd, &f.svfs) != 0) throw system_error("statvfs " + what, errno);
  return f;
}

ShmMount classify_shm(const FsStat& shm, std::optional<dev_t> dev_device) {
  if (dev_device && shm.st.st_dev == *dev_device) return ShmMount::kNotMount;
  return shm.is_tmpfs() ? ShmMount::kTmpfs : ShmMount::kNotTmpfs;
}

std::optional<dev_t> host_shm_device() {
  struct stat st {};
  if (::stat("/dev/shm", &st) != 0) return std::nullopt;
  return st.st_dev;
}

int open_mount_namespace(int pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/ns/mnt";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw system_error("open mount namespace " + path + " (is the container running?)", errno);
  return fd;
}

void join_mount_namespace(int ns_fd, int pid) {
  if (::setns(ns_fd, CLONE_NEWNS) != 0) throw system_error("join mount namespace of pid " + std::to_string(pid), errno);
}

ShmResult apply_shm(const ShmTarget& t) {
  const std::string root_text = t.rootfs.string();
  UniqueFd root(::open(t.rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw system_error("open container root " + root_text, errno);

  UniqueFd dev(open_dir_in_root(root.get(), "dev", Resolve::kNoSymlinks));
  if (!dev) throw Error(why_open_failed(errno, "/dev"), errno, kExitFailure);

  ShmResult result;
  UniqueFd shm(open_dir_in_root(dev.get(), "shm", Resolve::kNoSymlinks));
  if (!shm && errno != ENOENT) throw Error(why_open_failed(errno, "/dev/shm"), errno, kExitFailure);

  const FsStat dev_fs = stat_fs(dev.get(), "/dev");
  if (shm) {
    const FsStat shm_fs = stat_fs(shm.get(), "/dev/shm");
    if (t.host_shm_dev && shm_fs.st.st_dev == *t.host_shm_dev) {
      result.outcome = ShmOutcome::kHostShm;
      result.before = result.after = shm_fs.size();
      return result;
    }
    const ShmMount mount = classify_shm(shm_fs, dev_fs.st.st_dev);
    if (mount == ShmMount::kNotTmpfs)
      throw Error("/dev/shm in the container is a mount but not a tmpfs: refusing to touch it", 0, kExitFailure);
    if (mount == ShmMount::kTmpfs) {
      result.before = shm_fs.size();
      if (!resize_wanted(result.before, t.size, t.allow_shrink)) {
        result.outcome = ShmOutcome::kUnchanged;
        result.after = result.before;
        return result;
      }
      const std::string what = "remount /dev/shm with size=" + engine_size(t.size);
      // Source and type are ignored with MS_REMOUNT, but valgrind (rightly) checks the pointers.
      if (!reconfigure_tmpfs_size(shm.get(), t.size, what))
        mount_here(shm.get(), "shm", "tmpfs", MS_REMOUNT | mount_flags(shm_fs), "size=" + std::to_string(t.size), what);
      result.outcome = ShmOutcome::kResized;
      result.after = stat_fs(shm.get(), "/dev/shm").size();
      return result;
    }
  }
  // No /dev/shm mount (--ipc=none): a new tmpfs, but only inside the engine's tmpfs /dev,
  // never on a directory of the image itself.
  if (!dev_fs.is_tmpfs())
    throw Error("/dev in the container is not a tmpfs and has no /dev/shm mount: refusing to mount into the image", 0,
                kExitFailure);
  if (!shm) {
    if (::mkdirat(dev.get(), "shm", 01777) != 0 && errno != EEXIST) throw system_error("mkdir /dev/shm", errno);
    shm = UniqueFd(open_dir_in_root(dev.get(), "shm", Resolve::kNoSymlinks));
    if (!shm) throw Error(why_open_failed(errno, "/dev/shm"), errno, kExitFailure);
  }
  mount_here(shm.get(), "shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=" + std::to_string(t.size),
             "mount tmpfs on /dev/shm");
  // Re-open: the fd still names the directory under the new mount.
  UniqueFd mounted(open_dir_in_root(dev.get(), "shm", Resolve::kNoSymlinks));
  if (!mounted) throw system_error("reopen /dev/shm", errno);
  result.outcome = ShmOutcome::kMounted;
  result.after = stat_fs(mounted.get(), "/dev/shm").size();
  return result;
}

std::optional<Error> short_of_size(const ShmResult& r, std::uint64_t size) {
  const bool acted = r.outcome == ShmOutcome::kResized || r.outcome == ShmOutcome::kMounted;
  if (!acted || r.after >= size) return std::nullopt;
  return Error("/dev/shm is " + format_size(r.after) + " after resizing, asked for " + format_size(size));
}

std::optional<ShmResult> resize_engine_shm(const std::string& source, std::uint64_t size, bool allow_shrink,
                                           std::optional<dev_t> host_shm_dev) {
  if (source.size() < 2 || source[0] != '/') return std::nullopt;
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return std::nullopt;
  UniqueFd shm(open_dir_in_root(root.get(), source.c_str() + 1, Resolve::kNoSymlinks));
  if (!shm) return std::nullopt;
  UniqueFd parent(::openat(shm.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return std::nullopt;
  const FsStat shm_fs = stat_fs(shm.get(), source);
  struct stat up {};
  if (::fstat(parent.get(), &up) != 0) return std::nullopt;
  // A mount of its own: its device differs from its parent directory's.
  if (!shm_fs.is_tmpfs() || up.st_dev == shm_fs.st.st_dev) return std::nullopt;
  if (host_shm_dev && shm_fs.st.st_dev == *host_shm_dev) return std::nullopt;
  ShmResult result;
  result.before = result.after = shm_fs.size();
  if (!resize_wanted(result.before, size, allow_shrink)) return result;  // kUnchanged
  if (!reconfigure_tmpfs_size(shm.get(), size, "resize " + source + " to size=" + engine_size(size)))
    return std::nullopt;
  result.outcome = ShmOutcome::kResized;
  result.after = stat_fs(shm.get(), source).size();
  return result;
}

ShmProbe probe_shm_dir(int rootfd, Resolve resolve, const std::string& what) {
  ShmProbe p;
  p.dir = UniqueFd(open_dir_in_root(rootfd, "dev/shm", resolve));
  if (!p.dir) {
    p.error = errno;
    if (p.error == ENOENT || p.error == ENOTDIR || (p.error == ELOOP && resolve == Resolve::kNoSymlinks)) return p;
    throw system_error("open " + what, p.error);
  }
  p.fs = stat_fs(p.dir.get(), what);
  std::optional<dev_t> dev_device;
  struct stat dev_st {};
  const UniqueFd dev(open_dir_in_root(rootfd, "dev", resolve));
  if (dev && ::fstat(dev.get(), &dev_st) == 0) dev_device = dev_st.st_dev;
  p.mount = classify_shm(p.fs, dev_device);
  return p;
}

bool in_host_ipc_namespace(const std::string& pid, const std::string& what) {
  // The kernel's initial IPC namespace has the fixed proc inode PROC_IPC_INIT_INO.
  constexpr ino_t kInitialIpcNamespace = 0xEFFFFFFFU;
  struct stat mine {};
  struct stat theirs {};
  const std::string path = "/proc/" + pid + "/ns/ipc";
  if (::stat(path.c_str(), &theirs) != 0) throw system_error("stat " + path + " of " + what, errno);
  if (theirs.st_ino == kInitialIpcNamespace) return true;
  if (pid == "self") return false;
  if (::stat("/proc/self/ns/ipc", &mine) != 0) throw system_error("stat /proc/self/ns/ipc", errno);
  return mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
}

}  // namespace gpurun
