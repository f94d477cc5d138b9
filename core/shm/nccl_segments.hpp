#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpurun {

// NCCL's /dev/shm segments in a running container. NCCL names every segment it puts on
// /dev/shm "/dev/shm/nccl-XXXXXX" (src/misc/shmutils.cc ncclShmOpen: mkstemp, then
// posix_fallocate to its whole size, then mmap), maps it whole in each rank that uses it and
// unlinks it once every peer has it open, so the segments are seen in the processes'
// mappings (`/proc/PID/maps`, "... (deleted)"), not in the directory.
struct NcclSegments {
  std::uint64_t bytes = 0;  // the segments' sizes added up, each once
  std::uint64_t count = 0;
  std::vector<std::string> unread;  // the processes whose maps could not be read, and why
};

// The segments named in one process's maps text, added to `seen` (keyed by device and inode,
// so a segment that several ranks and their forked workers map counts once; its size is the
// furthest offset + length mapped). Lines that are not NCCL's are ignored.
using NcclSegmentMap = std::map<std::pair<std::string, std::uint64_t>, std::uint64_t>;
void collect_nccl_segments(std::string_view maps, NcclSegmentMap& seen);
NcclSegments total(const NcclSegmentMap& seen);

// The segments mapped by the processes in the mount namespace of `pid` (a container's init):
// each /proc/PID/maps of those processes. Processes that end while being read are skipped;
// those whose maps cannot be read otherwise (no permission, past 64 MiB) are named in `unread`.
NcclSegments nccl_segments_of_container(int pid);

// Splits a container's /dev/shm use into NCCL's segments and the rest (the DataLoaders'),
// sample by sample: `rest_peak` is the most the rest held at any sample. The mappings are
// scanned (`scan`) at the first sample, when a sample could be a new peak of the rest with the
// last scan's figure (at most once per `min_gap`: a job filling its queues makes a new peak
// every sample), and at least every `rescan`. A candidate within `min_gap` of the last scan
// waits for the next one and is measured with its segments: NCCL's live from the
// communicator's first use to its end, so the segments at the next scan are those of the
// sample (a segment made in the few ms between the sample and that scan would be subtracted
// from a sample that did not hold it). Pure apart from `scan`.
class NcclShmSplit {
 public:
  using Scan = std::function<NcclSegments(int pid)>;
  explicit NcclShmSplit(Scan scan = nccl_segments_of_container,
                        std::chrono::nanoseconds rescan = std::chrono::seconds(1),
                        std::chrono::nanoseconds min_gap = std::chrono::milliseconds(50));
  void sample(int pid, std::uint64_t used, std::chrono::nanoseconds now);
  std::uint64_t nccl_peak() const { return nccl_peak_; }
  std::uint64_t nccl_segments() const { return segments_; }
  std::uint64_t rest_peak() const;
  // The processes of the last scan that had any whose maps could not be read (their segments
  // count in the rest, which is then too large, never too small), and why.
  const std::vector<std::string>& unread() const { return unread_; }

 private:
  Scan scan_;
  std::chrono::nanoseconds rescan_;
  std::chrono::nanoseconds min_gap_;
  std::optional<std::chrono::nanoseconds> last_scan_;
  std::uint64_t nccl_now_ = 0;
  std::vector<std::string> unread_;
  std::uint64_t nccl_peak_ = 0;
  std::uint64_t segments_ = 0;
  std::uint64_t rest_peak_ = 0;
  std::uint64_t pending_used_ = 0;  // the largest candidate peak waiting for its scan
};

}  // namespace gpurun
