#include "shm/nccl_segments.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string>

#include "base/error.hpp"
#include "base/fd.hpp"

namespace gpurun {
namespace {

constexpr std::string_view kNcclPrefix = "/dev/shm/nccl-";
constexpr std::string_view kDeleted = " (deleted)";
// A hostile process can map a file 65,530 times under a 4 KiB name: its maps are not read
// past this.
constexpr std::size_t kMaxMapsBytes = 64u << 20;

// The next whitespace-delimited field of `line` from `at`, or an empty view.
std::string_view next_field(std::string_view line, std::size_t& at) {
  while (at < line.size() && line[at] == ' ') ++at;
  const std::size_t start = at;
  while (at < line.size() && line[at] != ' ') ++at;
  return line.substr(start, at - start);
}

// A whole field as a number in `base`.
bool parse_number(std::string_view s, std::uint64_t& out, int base) {
  const char* end = s.data() + s.size();
  const auto [at, ec] = std::from_chars(s.data(), end, out, base);
  return !s.empty() && ec == std::errc() && at == end;
}

// One maps line: "start-end perms offset dev inode   path".
void collect_line(std::string_view line, NcclSegmentMap& seen) {
  std::size_t at = 0;
  const std::string_view range = next_field(line, at);
  next_field(line, at);  // perms
  const std::string_view offset_text = next_field(line, at);
  const std::string_view dev = next_field(line, at);
  const std::string_view inode_text = next_field(line, at);
  while (at < line.size() && line[at] == ' ') ++at;
  std::string_view path = line.substr(at);
  if (path.substr(0, kNcclPrefix.size()) != kNcclPrefix) return;
  if (path.size() >= kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted)
    path.remove_suffix(kDeleted.size());
  if (path.size() == kNcclPrefix.size()) return;
  const std::size_t dash = range.find('-');
  std::uint64_t start = 0, end = 0, offset = 0, inode = 0;
  if (dash == std::string_view::npos || !parse_number(range.substr(0, dash), start, 16) ||
      !parse_number(range.substr(dash + 1), end, 16) || end < start || !parse_number(offset_text, offset, 16) ||
      !parse_number(inode_text, inode, 10) || dev.empty())
    return;
  const std::uint64_t length = end - start;
  if (offset > UINT64_MAX - length) return;
  std::uint64_t& size = seen[{std::string(dev), inode}];
  if (offset + length > size) size = offset + length;
}

// Adds the segments in /proc/PID/maps to `seen`. A process that has ended maps nothing: it adds
// nothing, and is no failure (a job's workers come and go between readdir and read). One whose
// maps cannot be read otherwise (no permission, past kMaxMapsBytes) adds nothing either, and
// why goes to `unread`.
void collect_process(const std::string& pid, NcclSegmentMap& seen, std::vector<std::string>& unread) {
  const std::string path = "/proc/" + pid + "/maps";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno != ENOENT && errno != ESRCH) unread.push_back(system_error(path + ": open", errno).what());
    return;
  }
  const OrWhy<std::string> maps = read_bounded_or_why(fd.get(), kMaxMapsBytes, path);
  if (maps)
    collect_nccl_segments(*maps, seen);
  else if (struct stat st{}; ::stat(("/proc/" + pid).c_str(), &st) == 0)  // not ended meanwhile
    unread.push_back(maps.why);
}

}  // namespace

void collect_nccl_segments(std::string_view maps, NcclSegmentMap& seen) {
  for (std::size_t nl; !maps.empty(); maps.remove_prefix(nl == std::string_view::npos ? maps.size() : nl + 1)) {
    nl = maps.find('\n');
    collect_line(maps.substr(0, nl), seen);
  }
}

NcclSegments total(const NcclSegmentMap& seen) {
  NcclSegments t;
  for (const auto& entry : seen) {
    t.bytes += entry.second;
    ++t.count;
  }
  return t;
}

NcclSegments nccl_segments_of_container(int pid) {
  struct stat ns {};
  if (pid <= 0 || ::stat(("/proc/" + std::to_string(pid) + "/ns/mnt").c_str(), &ns) != 0) return {};
  NcclSegmentMap seen;
  std::vector<std::string> unread;
  DIR* dir = ::opendir("/proc");
  if (!dir) return {};
  while (const struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const std::string other = e->d_name;
    struct stat st {};
    if (::stat(("/proc/" + other + "/ns/mnt").c_str(), &st) != 0) continue;
    if (st.st_dev != ns.st_dev || st.st_ino != ns.st_ino) continue;
    collect_process(other, seen, unread);
  }
  ::closedir(dir);
  NcclSegments t = total(seen);
  t.unread = std::move(unread);
  return t;
}

NcclShmSplit::NcclShmSplit(Scan scan, std::chrono::nanoseconds rescan, std::chrono::nanoseconds min_gap)
    : scan_(std::move(scan)), rescan_(rescan), min_gap_(min_gap) {}

void NcclShmSplit::sample(int pid, std::uint64_t used, std::chrono::nanoseconds now) {
  const bool due = !last_scan_ || now - *last_scan_ >= rescan_;
  const bool candidate = used > nccl_now_ && used - nccl_now_ > rest_peak_;
  const bool gap_passed = last_scan_ && now - *last_scan_ >= min_gap_;
  if (!due && candidate && !gap_passed) {
    // Within min_gap of the last scan: measured against the next scan's segments, not the
    // last one's (a segment made since would count in the rest and double a calibrated plan).
    pending_used_ = std::max(pending_used_, used);
    return;
  }
  if (due || ((candidate || pending_used_ > 0) && gap_passed)) {
    const NcclSegments s = scan_(pid);
    last_scan_ = now;
    nccl_now_ = s.bytes;
    if (s.bytes > nccl_peak_) nccl_peak_ = s.bytes;
    if (s.count > segments_) segments_ = s.count;
    if (!s.unread.empty()) unread_ = s.unread;
    if (pending_used_ > nccl_now_) rest_peak_ = std::max(rest_peak_, pending_used_ - nccl_now_);
    pending_used_ = 0;
  }
  const std::uint64_t rest = used > nccl_now_ ? used - nccl_now_ : 0;
  if (rest > rest_peak_) rest_peak_ = rest;
}

std::uint64_t NcclShmSplit::rest_peak() const {
  // A candidate still waiting for its scan (the job ended first) counts with the last scan's
  // figure: at worst too large, never too small.
  const std::uint64_t pending = pending_used_ > nccl_now_ ? pending_used_ - nccl_now_ : 0;
  return std::max(rest_peak_, pending);
}

}  // namespace gpurun
