#include "shm/shm_orphans.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/enum_name.hpp"
#include "base/error.hpp"
#include "base/fd.hpp"

namespace gpurun {
namespace orphan_scan {
namespace {

constexpr std::size_t kMaxListed = 100000;
constexpr std::size_t kMaxMapsBytes = 64u << 20;

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// A directory's entries through its fd (a copy: readdir owns the one it is given).
template <typename Visit>
void for_each_entry(int dirfd, const std::string& what, Visit visit) {
  const int copy = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw system_error("list " + what, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(copy), ::closedir);
  if (!dir) {
    const int err = errno;
    ::close(copy);
    throw system_error("list " + what, err);
  }
  // The copy shares the offset of `dirfd`: start from the beginning each time.
  ::rewinddir(dir.get());
  while (struct dirent* e = ::readdir(dir.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!visit(e->d_name)) break;
  }
}

bool is_pid(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The inodes on `dev` that /proc/PID/maps maps ("7f..-7f.. rw-s 00000000 00:1a 12345 /dev/shm/x").
// False when the file could not be read (the process exited: ENOENT/ESRCH, not counted).
bool read_maps(int pid_fd, dev_t dev, std::set<ino_t>& inodes, int& error) {
  UniqueFd maps(::openat(pid_fd, "maps", O_RDONLY | O_CLOEXEC));
  if (!maps) {
    error = errno;
    return false;
  }
  std::string text;
  try {
    text = read_bounded(maps.get(), kMaxMapsBytes, "maps");
  } catch (const Error& e) {
    error = e.errno_value() ? e.errno_value() : EIO;
    return false;
  }
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    unsigned major = 0, minor = 0;
    unsigned long long inode = 0;
    // address perms offset dev inode [path]
    if (std::sscanf(text.c_str() + pos, "%*s %*s %*s %x:%x %llu", &major, &minor, &inode) == 3 && inode != 0 &&
        makedev(major, minor) == dev)
      inodes.insert(static_cast<ino_t>(inode));
    pos = end + 1;
  }
  return true;
}

// The inodes on `dev` among /proc/PID/fd's open files.
bool read_fds(int pid_fd, dev_t dev, std::set<ino_t>& inodes, int& error) {
  UniqueFd fds(::openat(pid_fd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fds) {
    error = errno;
    return false;
  }
  try {
    for_each_entry(fds.get(), "fd", [&](const char* name) {
      struct stat st {};
      // stat follows the magic link to the open file itself, in whatever namespace it is.
      if (::fstatat(fds.get(), name, &st, 0) == 0 && st.st_dev == dev) inodes.insert(st.st_ino);
      return true;
    });
  } catch (const Error& e) {
    error = e.errno_value() ? e.errno_value() : EIO;
    return false;
  }
  return true;
}

// Whether the mount namespace of the process `pid_fd` has a mount of device `dev`: one that
// does not cannot open a segment there by its name. True when mountinfo cannot be read.
bool sees_device(int pid_fd, dev_t dev) {
  UniqueFd info(::openat(pid_fd, "mountinfo", O_RDONLY | O_CLOEXEC));
  if (!info) return true;
  const OrWhy<std::string> read = read_bounded_or_why(info.get(), kMaxMapsBytes, "mountinfo");
  if (!read) return true;
  const std::string& text = *read;
  const std::string device = " " + std::to_string(major(dev)) + ":" + std::to_string(minor(dev)) + " ";
  // "36 35 0:27 / /dev/shm rw - tmpfs ...": the third field is the device.
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    const std::size_t first = line.find(' ');
    const std::size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
    if (second != std::string_view::npos && line.substr(second, device.size()) == device) return true;
    pos = end + 1;
  }
  return false;
}

}  // namespace
}  // namespace orphan_scan

const char* segment_family_name(SegmentFamily family) {
  static const char* const kNames[] = {"nccl", "torch",     "python-shm",    "python-sem",
                                       "vllm", "deepspeed", "triton-python", "other"};
  return enum_name(family, kNames);
}

SegmentFamily segment_family(std::string_view name) {
  if (orphan_scan::starts_with(name, kReapQuarantinePrefix)) name.remove_prefix(kReapQuarantinePrefix.size());
  if (orphan_scan::starts_with(name, "nccl-")) return SegmentFamily::kNccl;
  if (orphan_scan::starts_with(name, "torch_")) return SegmentFamily::kTorch;
  if (orphan_scan::starts_with(name, "psm_")) return SegmentFamily::kPythonShm;
  if (orphan_scan::starts_with(name, "sem.mp-")) return SegmentFamily::kPythonSem;
  if (orphan_scan::starts_with_nocase(name, "vllm")) return SegmentFamily::kVllm;
  if (orphan_scan::starts_with(name, "deepspeed_allreduce_buffer_")) return SegmentFamily::kDeepSpeed;
  if (orphan_scan::starts_with(name, "triton_python_backend_shm_region_")) return SegmentFamily::kTritonPython;
  return SegmentFamily::kOther;
}

std::vector<ShmSegment> list_segments(int dirfd, const std::string& what) {
  std::vector<ShmSegment> out;
  orphan_scan::for_each_entry(dirfd, what, [&](const char* name) {
    if (out.size() >= orphan_scan::kMaxListed) return false;
    struct stat st {};
    if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return true;
    ShmSegment s;
    s.name = name;
    s.bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
    s.inode = st.st_ino;
    s.family = segment_family(s.name);
    s.changed = std::max(st.st_mtime, st.st_ctime);
    out.push_back(std::move(s));
    return true;
  });
  std::sort(out.begin(), out.end(), [](const ShmSegment& a, const ShmSegment& b) { return a.name < b.name; });
  return out;
}

Holders scan_holders(int proc_fd, dev_t dev) {
  Holders h;
  std::vector<std::string> pids;
  orphan_scan::for_each_entry(proc_fd, "/proc", [&](const char* name) {
    if (orphan_scan::is_pid(name)) pids.emplace_back(name);
    return true;
  });
  for (const std::string& pid : pids) {
    UniqueFd pid_fd(::openat(proc_fd, pid.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!pid_fd) continue;  // exited since the listing
    int error = 0;
    const bool fds = orphan_scan::read_fds(pid_fd.get(), dev, h.inodes, error);
    const bool maps = fds && orphan_scan::read_maps(pid_fd.get(), dev, h.inodes, error);
    if (fds && maps) {
      ++h.processes;
      continue;
    }
    // A process that exited meanwhile holds nothing; one whose mount namespace has no mount of
    // the tmpfs cannot have opened a segment by its name; any other stays unknown.
    if (error != ENOENT && error != ESRCH && orphan_scan::sees_device(pid_fd.get(), dev))
      h.unreadable.push_back(static_cast<pid_t>(std::atol(pid.c_str())));
  }
  return h;
}

std::uint64_t OrphanReport::orphan_bytes() const {
  std::uint64_t sum = 0;
  for (const ShmSegment& s : orphans) sum += s.bytes;
  return sum;
}

OrphanReport classify_segments(const std::vector<ShmSegment>& segments, const std::set<ino_t>& held, std::time_t now,
                               std::time_t min_age) {
  OrphanReport r;
  for (const ShmSegment& s : segments) {
    if (s.family == SegmentFamily::kOther)
      r.others.push_back(s);
    else if (held.count(s.inode))
      r.held.push_back(s);
    else if (now - s.changed < min_age)
      r.recent.push_back(s);
    else
      r.orphans.push_back(s);
  }
  return r;
}

OrphanReport find_orphans(int shm_dirfd, dev_t dev, int proc_fd, std::time_t min_age, std::vector<pid_t>* unreadable) {
  const std::vector<ShmSegment> segments = list_segments(shm_dirfd, "/dev/shm");
  Holders h = scan_holders(proc_fd, dev);
  if (unreadable) *unreadable = std::move(h.unreadable);
  return classify_segments(segments, h.inodes, std::time(nullptr), min_age);
}

ReapResult reap_orphans(int shm_dirfd, dev_t dev, int proc_fd, const std::vector<ShmSegment>& orphans) {
  ReapResult r;
  struct Quarantined {
    ShmSegment segment;
    std::string name;
  };
  std::vector<Quarantined> quarantined;
  // 1. Take each name away: a process that opens the segment by its name from now on creates a
  //    new one (or fails to attach) instead of reaching the file about to go.
  for (const ShmSegment& s : orphans) {
    const bool already = orphan_scan::starts_with(s.name, kReapQuarantinePrefix);
    const std::string name = already ? s.name : std::string(kReapQuarantinePrefix) + s.name;
    if (!already && ::renameat2(shm_dirfd, s.name.c_str(), shm_dirfd, name.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno != ENOENT) r.failed.push_back(s.name + ": rename: " + std::strerror(errno));
      continue;  // ENOENT: its owner, or another reap, removed it meanwhile
    }
    struct stat st {};
    if (::fstatat(shm_dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_ino != s.inode) {
      // Not the file that was listed: a new one took the name before the rename. Give it back.
      if (!already) (void)::renameat2(shm_dirfd, name.c_str(), shm_dirfd, s.name.c_str(), RENAME_NOREPLACE);
      r.kept.push_back(s);
      continue;
    }
    quarantined.push_back({s, name});
  }
  if (quarantined.empty()) return r;
  // 2. Look at every process again: one that opened or mapped a segment between the first look
  //    and the rename holds it now.
  const Holders h = scan_holders(proc_fd, dev);
  for (const Quarantined& q : quarantined) {
    const std::string original = orphan_scan::starts_with(q.segment.name, kReapQuarantinePrefix)
                                     ? q.segment.name.substr(kReapQuarantinePrefix.size())
                                     : q.segment.name;
    if (h.inodes.count(q.segment.inode) || !h.unreadable.empty()) {
      if (::renameat2(shm_dirfd, q.name.c_str(), shm_dirfd, original.c_str(), RENAME_NOREPLACE) != 0)
        r.failed.push_back(q.segment.name + ": in use again, left as " + q.name + ": " + std::strerror(errno));
      else
        r.kept.push_back(q.segment);
      continue;
    }
    // 3. Held by none with its name gone: unlink it.
    if (::unlinkat(shm_dirfd, q.name.c_str(), 0) != 0)
      r.failed.push_back(q.segment.name + ": unlink: " + std::strerror(errno));
    else
      r.removed.push_back(q.segment);
  }
  return r;
}

}  // namespace gpurun
