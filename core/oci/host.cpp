#include "oci/host.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"

namespace gpurun {
namespace {

// These files are read on every container start (by the hook) and every gpu-run: plain
// read(2) and string_view scanning, no streams (their locale set-up alone cost more than
// the rest of the probe).
constexpr std::size_t kMaxProbeFile = 1 << 16;

std::optional<std::uint64_t> to_u64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// The next whitespace-separated word of `s` from `pos`, advancing `pos` past it.
std::string_view next_word(std::string_view s, std::size_t& pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  std::size_t begin = pos;
  while (pos < s.size() && !is_space(s[pos])) ++pos;
  return s.substr(begin, pos - begin);
}

// Calls f(piece) for each piece of `s` between `sep`s; like std::getline, a trailing
// separator does not make an empty last piece. Stops early when f returns false.
template <typename F>
void for_each_piece(std::string_view s, char sep, F f) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t end = s.find(sep, pos);
    if (end == std::string_view::npos) end = s.size();
    if (!f(s.substr(pos, end - pos))) return;
    pos = end + 1;
  }
}

// The cgroup directory of the process under `mount`. Inside a container the mount shows
// the container's own cgroup at its root while /proc/self/cgroup still names the host's
// path (cgroup v1 without a cgroup namespace): fall back to the mount's root then.
fs::path cgroup_dir(const fs::path& mount, const std::string& path) {
  fs::path dir = mount / fs::path(path).relative_path();
  std::error_code ec;
  return fs::is_directory(dir, ec) ? dir : mount;
}

}  // namespace

bool node_guard_runs(const fs::path& alive) {
  // Non-blocking and a regular file only: every container start asks, and a FIFO or a device put
  // at the path must not hang it.
  UniqueFd fd(::open(alive.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  // Asked for a read lock, the kernel reports only a write lock in the way.
  struct flock probe {};
  probe.l_type = F_RDLCK;
  probe.l_whence = SEEK_SET;
  return ::fcntl(fd.get(), F_GETLK, &probe) == 0 && probe.l_type == F_WRLCK;
}

UniqueFd publish_node_guard_alive(const fs::path& alive) {
  std::string name = alive.string() + ".XXXXXX";
  UniqueFd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd) throw system_error("create " + name, errno);
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;
  if (::fchmod(fd.get(), 0644) != 0 || ::fcntl(fd.get(), F_SETLK, &whole) != 0 ||
      ::rename(name.c_str(), alive.c_str()) != 0) {
    const int err = errno;
    ::unlink(name.c_str());
    throw system_error("publish " + alive.string(), err);
  }
  return fd;
}

OrWhy<std::string> read_kernel_file(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return OrWhy<std::string>::none(system_error(path.string() + ": open", errno).what());
  OrWhy<std::string> s = read_bounded_or_why(fd.get(), kMaxProbeFile, path.string());
  if (!s) return s;
  while (!s->empty() && (s->back() == '\n' || s->back() == ' ')) s->pop_back();
  return s;
}

std::optional<double> parse_cpu_max(const std::string& text) {
  std::size_t pos = 0;
  std::string_view quota = next_word(text, pos), period = next_word(text, pos);
  if (quota == "max" || quota.empty()) return std::nullopt;
  auto q = to_u64(quota), p = to_u64(period.empty() ? "100000" : period);
  if (!q || !p || *p == 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> parse_cfs_quota(const std::string& quota, const std::string& period) {
  if (quota.empty() || quota[0] == '-') return std::nullopt;
  auto q = to_u64(quota), p = to_u64(period);
  if (!q || !p || *p == 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<std::uint64_t> parse_memory_limit(const std::string& text) {
  if (text == "max") return std::nullopt;
  auto v = to_u64(text);
  // cgroup v1 reports "no limit" as a page-aligned number near 2^63.
  if (!v || *v >= (std::uint64_t{1} << 60)) return std::nullopt;
  return v;
}

std::pair<std::uint64_t, std::uint64_t> parse_meminfo(const std::string& text) {
  std::uint64_t total = 0, available = 0;
  for_each_piece(text, '\n', [&](std::string_view line) {
    std::size_t pos = 0;
    std::string_view key = next_word(line, pos);
    std::uint64_t* slot = key == "MemTotal:" ? &total : key == "MemAvailable:" ? &available : nullptr;
    if (slot) {
      auto kb = to_u64(next_word(line, pos));
      if (kb && *kb <= UINT64_MAX / 1024) *slot = *kb * 1024;
    }
    return true;
  });
  return {total, available};
}

std::optional<std::string> parse_proc_cgroup(const std::string& text, const std::string& controller) {
  std::optional<std::string> found;
  for_each_piece(text, '\n', [&](std::string_view line) {
    auto a = line.find(':');
    auto b = line.find(':', a == std::string_view::npos ? 0 : a + 1);
    if (a == std::string_view::npos || b == std::string_view::npos) return true;
    std::string_view ctrls = line.substr(a + 1, b - a - 1);
    std::string_view path = line.substr(b + 1);
    if (controller.empty()) {
      if (line.substr(0, a) == "0" && ctrls.empty()) found = std::string(path);
    } else {
      for_each_piece(ctrls, ',', [&](std::string_view c) {
        if (c == controller) found = std::string(path);
        return !found;
      });
    }
    return !found;
  });
  return found;
}

std::optional<unsigned> parse_cpu_list(const std::string& text) {
  if (text.empty()) return std::nullopt;
  unsigned count = 0;
  bool ok = true;
  for_each_piece(text, ',', [&](std::string_view range) {
    auto dash = range.find('-');
    auto lo = to_u64(range.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : to_u64(range.substr(dash + 1));
    ok = lo && hi && *hi >= *lo && *hi <= 65535;
    if (ok) count += static_cast<unsigned>(*hi - *lo + 1);
    return ok;
  });
  if (!ok) return std::nullopt;
  return count;
}

std::optional<std::string> parent_cgroup_dir(const std::string& cgroups_path) {
  const std::string_view p = cgroups_path;
  if (p.empty() || p.size() > 4096 || p.find('\0') != std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> parts;
  if (p.front() == '/') {
    // cgroupfs driver: an absolute path; the container's cgroup is its last component.
    bool ok = true;
    for_each_piece(p.substr(1), '/', [&](std::string_view piece) {
      if (piece == "." || piece == "..") ok = false;
      if (!piece.empty()) parts.push_back(piece);
      return ok;
    });
    if (!ok || parts.size() < 2) return std::nullopt;
    parts.pop_back();
    std::string dir;
    for (std::string_view piece : parts) (dir += dir.empty() ? "" : "/") += piece;
    return dir;
  }
  // systemd driver: "slice:prefix:name", the container's scope sits in the slice, whose
  // name expands to its ancestors ("a-b.slice" -> "a.slice/a-b.slice"), as runc does.
  const std::size_t c1 = p.find(':');
  const std::size_t c2 = c1 == std::string_view::npos ? c1 : p.find(':', c1 + 1);
  if (c2 == std::string_view::npos || p.find(':', c2 + 1) != std::string_view::npos) return std::nullopt;
  std::string_view slice = p.substr(0, c1);
  constexpr std::string_view kSuffix = ".slice";
  if (slice.size() <= kSuffix.size() || slice.substr(slice.size() - kSuffix.size()) != kSuffix) return std::nullopt;
  slice.remove_suffix(kSuffix.size());
  if (slice == "-" || slice.find('/') != std::string_view::npos) return std::nullopt;  // "-.slice" is the root
  std::string dir, prefix;
  bool ok = true;
  std::size_t pos = 0;
  while (ok) {
    const std::size_t dash = slice.find('-', pos);
    const std::string_view piece = slice.substr(pos, dash == std::string_view::npos ? dash : dash - pos);
    if (piece.empty()) ok = false;  // "a--b", "-a", "a-": systemd rejects them
    (((dir += dir.empty() ? "" : "/") += prefix) += piece) += kSuffix;
    (prefix += piece) += '-';
    if (dash == std::string_view::npos) break;
    pos = dash + 1;
  }
  if (!ok) return std::nullopt;
  return dir;
}

std::optional<std::uint64_t> probe_parent_memory_limit(const std::string& cgroups_path, const fs::path& root) {
  const std::optional<std::string> dir = parent_cgroup_dir(cgroups_path);
  if (!dir) return std::nullopt;
  UniqueFd at(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!at) return std::nullopt;
  const bool v2 = ::faccessat(at.get(), "cgroup.controllers", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
  const fs::path walk = v2 ? *dir : "memory/" + *dir;
  // One component at a time with O_NOFOLLOW: the path comes from a spec, and no symlink on
  // the way may lead out of the cgroup mount.
  std::optional<std::string> text = read_below(root, walk / (v2 ? "memory.max" : "memory.limit_in_bytes"), 64);
  if (!text) return std::nullopt;
  while (!text->empty() && is_space(text->back())) text->pop_back();
  return parse_memory_limit(*text);
}

unsigned usable_cpus(unsigned affinity, std::optional<double> quota) {
  unsigned cpus = affinity == 0 ? 1 : affinity;
  // Only a quota below the CPU count lowers it; a larger one (up to 2^63 in a spec) would
  // not fit an unsigned.
  if (quota && *quota > 0 && *quota < static_cast<double>(cpus)) cpus = static_cast<unsigned>(std::ceil(*quota - 1e-9));
  return cpus == 0 ? 1 : cpus;
}

HostInfo probe_host(const fs::path& root) {
  HostInfo info;
  // Each file is a hint: without it the figure stays unknown and the decision uses what it has
  // (the affinity's CPUs, no cgroup limit), so a probe never fails a door. A file the kernel
  // does not have (no such controller, cgroup v1 or v2) is no figure, not a failure; one that is
  // there but cannot be read is kept in `unread` for the door to log.
  auto probe_file = [&info](const fs::path& path) -> std::optional<std::string> {
    OrWhy<std::string> text = read_kernel_file(path);
    if (text) return std::move(*text);
    std::error_code ec;
    if (fs::exists(path, ec)) info.unread.push_back(text.why);
    return std::nullopt;
  };
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) info.affinity_cpus = static_cast<unsigned>(CPU_COUNT(&set));
  const fs::path cg = root / "sys/fs/cgroup";
  std::string self = probe_file(root / "proc/self/cgroup").value_or("");
  // cgroup v2 (unified) first, then v1 controllers.
  if (auto path = parse_proc_cgroup(self, ""); path && fs::exists(cg / "cgroup.controllers")) {
    fs::path dir = cgroup_dir(cg, *path);
    if (auto t = probe_file(dir / "cpu.max")) info.cgroup_cpu_quota = parse_cpu_max(*t);
    if (auto t = probe_file(dir / "memory.max")) info.cgroup_memory_limit = parse_memory_limit(*t);
  } else {
    if (auto cpu_path = parse_proc_cgroup(self, "cpu")) {
      fs::path dir = cgroup_dir(cg / "cpu", *cpu_path);
      auto q = probe_file(dir / "cpu.cfs_quota_us"), p = probe_file(dir / "cpu.cfs_period_us");
      if (q && p) info.cgroup_cpu_quota = parse_cfs_quota(*q, *p);
    }
    if (auto mem_path = parse_proc_cgroup(self, "memory")) {
      fs::path dir = cgroup_dir(cg / "memory", *mem_path);
      if (auto t = probe_file(dir / "memory.limit_in_bytes")) info.cgroup_memory_limit = parse_memory_limit(*t);
    }
  }
  info.cpus = usable_cpus(info.affinity_cpus, info.cgroup_cpu_quota);
  if (auto t = probe_file(root / "proc/meminfo")) {
    auto [total, available] = parse_meminfo(*t);
    info.mem_total = total;
    info.mem_available = available;
  }
  return info;
}

}  // namespace gpurun
