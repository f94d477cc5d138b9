#include "host.hpp"

#include <sched.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace gpurun {
namespace {

std::optional<std::string> slurp(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<std::uint64_t> to_u64(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
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

std::optional<double> parse_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota, period;
  in >> quota >> period;
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
  std::istringstream in(text);
  std::string line;
  std::uint64_t total = 0, available = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    std::uint64_t kb = 0;
    ls >> key >> kb;
    if (key == "MemTotal:") total = kb * 1024;
    if (key == "MemAvailable:") available = kb * 1024;
  }
  return {total, available};
}

std::optional<std::string> parse_proc_cgroup(const std::string& text, const std::string& controller) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a == std::string::npos ? 0 : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controller.empty()) {
      if (line.compare(0, a, "0") == 0 && ctrls.empty()) return path;
      continue;
    }
    std::istringstream cs(ctrls);
    std::string c;
    while (std::getline(cs, c, ','))
      if (c == controller) return path;
  }
  return std::nullopt;
}

std::optional<unsigned> parse_cpu_list(const std::string& text) {
  if (text.empty()) return std::nullopt;
  unsigned count = 0;
  std::istringstream in(text);
  std::string range;
  while (std::getline(in, range, ',')) {
    auto dash = range.find('-');
    auto lo = to_u64(range.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : to_u64(range.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi > 65535) return std::nullopt;
    count += static_cast<unsigned>(*hi - *lo + 1);
  }
  return count;
}

unsigned usable_cpus(unsigned affinity, std::optional<double> quota) {
  unsigned cpus = affinity == 0 ? 1 : affinity;
  // Only a quota below the CPU count lowers it; a larger one (up to 2^63 in a spec) would
  // not fit an unsigned.
  if (quota && *quota > 0 && *quota < static_cast<double>(cpus))
    cpus = static_cast<unsigned>(std::ceil(*quota - 1e-9));
  return cpus == 0 ? 1 : cpus;
}

HostInfo probe_host(const fs::path& root) {
  HostInfo info;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) info.affinity_cpus = static_cast<unsigned>(CPU_COUNT(&set));
  const fs::path cg = root / "sys/fs/cgroup";
  std::string self = slurp(root / "proc/self/cgroup").value_or("");
  // cgroup v2 (unified) first, then v1 controllers.
  if (auto path = parse_proc_cgroup(self, ""); path && fs::exists(cg / "cgroup.controllers")) {
    fs::path dir = cgroup_dir(cg, *path);
    if (auto t = slurp(dir / "cpu.max")) info.cgroup_cpu_quota = parse_cpu_max(*t);
    if (auto t = slurp(dir / "memory.max")) info.cgroup_memory_limit = parse_memory_limit(*t);
  } else {
    if (auto cpu_path = parse_proc_cgroup(self, "cpu")) {
      fs::path dir = cgroup_dir(cg / "cpu", *cpu_path);
      auto q = slurp(dir / "cpu.cfs_quota_us"), p = slurp(dir / "cpu.cfs_period_us");
      if (q && p) info.cgroup_cpu_quota = parse_cfs_quota(*q, *p);
    }
    if (auto mem_path = parse_proc_cgroup(self, "memory")) {
      fs::path dir = cgroup_dir(cg / "memory", *mem_path);
      if (auto t = slurp(dir / "memory.limit_in_bytes")) info.cgroup_memory_limit = parse_memory_limit(*t);
    }
  }
  info.cpus = usable_cpus(info.affinity_cpus, info.cgroup_cpu_quota);
  if (auto t = slurp(root / "proc/meminfo")) {
    auto [total, available] = parse_meminfo(*t);
    info.mem_total = total;
    info.mem_available = available;
  }
  return info;
}

}  // namespace gpurun
