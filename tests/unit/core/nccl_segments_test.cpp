#include "shm/nccl_segments.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace gpurun {
namespace {

using namespace std::chrono_literals;

// Two ranks' maps as Linux prints them: the same segment (00:1f 1001) mapped by both, one
// mapped at an offset, a DataLoader batch (PyTorch's torch_ files) and libraries.
constexpr const char* kRank0 =
    "7f0000000000-7f0000932000 rw-s 00000000 00:1f 1001                       /dev/shm/nccl-WU88OE (deleted)\n"
    "7f0000a00000-7f0000a01000 rw-s 00000000 00:1f 1002                       /dev/shm/nccl-Ab12Cd (deleted)\n"
    "7f0001000000-7f0004000000 rw-s 00000000 00:1f 2001                       /dev/shm/torch_123_456 (deleted)\n"
    "7f0005000000-7f0005021000 r-xp 00000000 08:01 3001                       /usr/lib/libc.so.6\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n";
constexpr const char* kRank1 =
    "7e0000000000-7e0000932000 rw-s 00000000 00:1f 1001                       /dev/shm/nccl-WU88OE (deleted)\n"
    "7e0000a00000-7e0000a02000 rw-s 00001000 00:1f 1002                       /dev/shm/nccl-Ab12Cd\n"
    "7e0000b00000-7e0000b01000 rw-s 00000000 00:20 1001                       /dev/shm/nccl-Other1\n";

TEST(NcclSegmentsTest, CountsEachSegmentOnceAtItsFurthestMappedByte) {
  NcclSegmentMap seen;
  collect_nccl_segments(kRank0, seen);
  collect_nccl_segments(kRank1, seen);
  const NcclSegments t = total(seen);
  // 0x932000 = 9,641,984 (NCCL's 9,637,888-byte receive segment and its refcount, page-rounded),
  // 0x1000 + 0x2000 (rank 1 maps pages 1-2 of 1002), one page on another device.
  EXPECT_EQ(t.count, 3u);
  EXPECT_EQ(t.bytes, 0x932000u + 0x3000u + 0x1000u);
}

TEST(NcclSegmentsTest, IgnoresWhatIsNotAnNcclSegmentAndMalformedLines) {
  NcclSegmentMap seen;
  collect_nccl_segments(
      "7f0000000000-7f0000001000 rw-s 00000000 00:1f 5 /dev/shm/nccl-\n"               // no suffix
      "7f0000000000-7f0000001000 rw-s 00000000 00:1f 6 /dev/shm/nccl\n"                // not the prefix
      "7f0000000000-7f0000001000 rw-s 00000000 00:1f 7 /tmp/dev/shm/nccl-x\n"          // elsewhere
      "7f0000001000-7f0000000000 rw-s 00000000 00:1f 8 /dev/shm/nccl-backwards\n"      // end < start
      "zz-7f0000001000 rw-s 00000000 00:1f 9 /dev/shm/nccl-badhex\n"                   // bad range
      "7f0000000000-7f0000001000 rw-s ffffffffffffffff 00:1f 10 /dev/shm/nccl-wrap\n"  // offset overflows
      "7f0000000000-7f0000001000 rw-s 00000000 00:1f x1 /dev/shm/nccl-badinode\n"
      "garbage\n"
      "\n"
      "7f0000000000-7f0000001000",
      seen);
  EXPECT_EQ(total(seen).count, 0u);
  EXPECT_EQ(total(seen).bytes, 0u);
}

// The real thing on this host: a segment made the way NCCL makes one, mapped by this process
// and a forked child (as PyTorch's workers inherit a rank's mappings), unlinked.
TEST(NcclSegmentsTest, FindsAnUnlinkedSegmentMappedByTwoProcessesOnce) {
  const NcclSegments before = nccl_segments_of_container(::getpid());
  char path[] = "/dev/shm/nccl-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  constexpr std::size_t kSize = 3 * 4096;
  ASSERT_EQ(::posix_fallocate(fd, 0, kSize), 0);
  void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  ::close(fd);
  ::unlink(path);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  const NcclSegments during = nccl_segments_of_container(::getpid());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::munmap(p, kSize);
  EXPECT_EQ(during.bytes - before.bytes, kSize);
  EXPECT_EQ(during.count - before.count, 1u);
  EXPECT_EQ(nccl_segments_of_container(0).count, 0u);
}

TEST(NcclSegmentsTest, SplitMeasuresEachNewPeakWithTheSegmentsOfThatMoment) {
  // NCCL's segments: none until t=2 (lazy connection at the first all-reduce), then 40.
  std::vector<std::chrono::nanoseconds> scans;
  std::chrono::nanoseconds clock{0};
  NcclShmSplit split(
      [&](int) {
        scans.push_back(clock);
        return clock >= 2s ? NcclSegments{40, 2, {}} : NcclSegments{};
      },
      10s);
  const std::vector<std::pair<std::chrono::nanoseconds, std::uint64_t>> samples = {
      {0s, 10}, {10ms, 12}, {1s, 30}, {1500ms, 20}, {2s, 60}, {3s, 65}, {4s, 50}, {15s, 90}};
  for (const auto& [t, used] : samples) {
    clock = t;
    split.sample(1, used, t);
  }
  // 30 at t=1 (no NCCL yet); at t=2, 60 = 40 NCCL + 20; 65 = 40 + 25; at t=15, 90 = 40 + 50.
  // Counting 60 and 65 against the t=1 scan would have made the rest's peak 65.
  EXPECT_EQ(split.rest_peak(), 50u);
  EXPECT_EQ(split.nccl_peak(), 40u);
  EXPECT_EQ(split.nccl_segments(), 2u);
  // Scanned at the first sample and at each candidate peak with the last scan's figure (t=1;
  // t=2: 60 - 0 > 30; t=15: 90 - 40 > 30, and due), never at t=1.5, 3 (65 - 40 < 30) or 4,
  // nor at 10 ms (a candidate, but within min_gap of the first scan).
  const std::vector<std::chrono::nanoseconds> want = {0s, 1s, 2s, 15s};
  EXPECT_EQ(scans, want);
}

TEST(NcclSegmentsTest, SplitMeasuresAPeakWithinMinGapWithTheNextScan) {
  // The segments (40) appear at t=5 ms, between the first scan (t=0) and a sample at 10 ms that
  // holds them (10 + 40): within min_gap, so it waits for the next scan (t=100 ms, 60 = 40 + 20).
  std::chrono::nanoseconds clock{0};
  NcclShmSplit split([&](int) { return clock >= 5ms ? NcclSegments{40, 1, {}} : NcclSegments{}; }, 10s);
  for (const auto& [t, used] :
       std::vector<std::pair<std::chrono::nanoseconds, std::uint64_t>>{{0s, 10}, {10ms, 50}, {100ms, 60}}) {
    clock = t;
    split.sample(1, used, t);
  }
  EXPECT_EQ(split.rest_peak(), 20u);  // not 50: the 10 ms sample counted 40 of NCCL's
  EXPECT_EQ(split.nccl_peak(), 40u);
}

TEST(NcclSegmentsTest, SplitCountsAWaitingPeakWhenTheJobEndsFirst) {
  // A candidate within min_gap and no sample after it: counted with the last scan's figure.
  NcclShmSplit split([](int) { return NcclSegments{}; }, 10s);
  split.sample(1, 10, 0s);
  split.sample(1, 70, 10ms);
  EXPECT_EQ(split.rest_peak(), 70u);
}

TEST(NcclSegmentsTest, SplitKeepsWhyAScanCouldNotReadAProcess) {
  NcclShmSplit split([](int) { return NcclSegments{40, 1, {"/proc/7/maps: open: Permission denied"}}; }, 10s);
  EXPECT_TRUE(split.unread().empty()) << "no scan yet";
  split.sample(1, 50, 0s);
  ASSERT_EQ(split.unread().size(), 1u);
  EXPECT_EQ(split.unread()[0], "/proc/7/maps: open: Permission denied");
}

}  // namespace
}  // namespace gpurun
