#include "shm/shm_sampler.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "base/process.hpp"

namespace gpurun {
namespace {

using namespace std::chrono_literals;

TEST(ShmSamplerTest, TracksThePeakUntilTheReaderFails) {
  const std::vector<std::uint64_t> used = {10, 50, 30, 70, 20};
  std::size_t i = 0;
  std::vector<std::uint64_t> seen_peaks;
  SamplerOptions o;
  o.interval = 1ms;
  o.on_sample = [&](const ShmUsage&, const ShmSampleStats& s) { seen_peaks.push_back(s.peak); };
  ShmSampleStats s = sample_shm(
      [&]() -> std::optional<ShmUsage> {
        if (i == used.size()) return std::nullopt;
        return ShmUsage{1000, used[i++]};
      },
      o);
  EXPECT_TRUE(s.gone);
  EXPECT_EQ(s.samples, 5u);
  EXPECT_EQ(s.peak, 70u);
  EXPECT_EQ(s.last_used, 20u);
  EXPECT_EQ(s.size, 1000u);
  EXPECT_EQ(seen_peaks, (std::vector<std::uint64_t>{10, 50, 50, 70, 70}));
  EXPECT_EQ(s.burst, 40u) << "the largest rise between two samples (10 -> 50, 30 -> 70)";
}

// The burst is a rise between two samples: the first reading is no rise from nothing, and falls
// count for nothing.
TEST(ShmSamplerTest, TheBurstIsTheLargestRiseBetweenTwoSamples) {
  const std::vector<std::uint64_t> used = {500, 510, 400, 445, 445, 0, 30};
  std::size_t i = 0;
  SamplerOptions o;
  o.interval = 1ms;
  const ShmSampleStats s = sample_shm(
      [&]() -> std::optional<ShmUsage> {
        if (i == used.size()) return std::nullopt;
        return ShmUsage{1000, used[i++]};
      },
      o);
  EXPECT_EQ(s.burst, 45u);
}

TEST(ShmSamplerTest, StopsWhenAsked) {
  int calls = 0;
  SamplerOptions o;
  o.interval = 1ms;
  o.stop = [&] { return calls >= 3; };
  ShmSampleStats s = sample_shm(
      [&]() -> std::optional<ShmUsage> {
        ++calls;
        return ShmUsage{8, 1};
      },
      o);
  EXPECT_FALSE(s.gone);
  EXPECT_EQ(s.samples, 3u);
}

TEST(ShmSamplerTest, KeepsTheRateWithAbsoluteDeadlines) {
  int n = 0;
  SamplerOptions o;
  o.interval = 5ms;
  o.stop = [&] { return n >= 21; };
  ShmSampleStats s = sample_shm(
      [&]() -> std::optional<ShmUsage> {
        ++n;
        return ShmUsage{8, 1};
      },
      o);
  // 20 intervals of 5 ms: about 100 ms, never much less (a loaded machine may take longer).
  EXPECT_GE(s.seconds, 0.095);
  EXPECT_LT(s.seconds, 2.0);
}

TEST(ShmSamplerTest, SamplesAProcessUntilItIsGone) {
  // The child lives until the sampler has read it five times, then is killed: a child that ended
  // by itself (a short sleep) could end before the first sample on a loaded machine (CI saw 0).
  Child child = spawn({"sleep", "60"});
  const int pid = child.pid();
  SamplerOptions o;
  o.interval = 10ms;
  o.on_sample = [&](const ShmUsage&, const ShmSampleStats& s) {
    if (s.samples == 5) ::kill(pid, SIGKILL);
  };
  int code = -1;
  bool exited = false;
  // A child stays a zombie (its /proc entry readable) until reaped: reap it as the engine's
  // poll does in run_measured.
  o.stop = [&] { return exited || (exited = child.poll(code)); };
  ShmSampleStats s = sample_shm_of_pid(pid, o);
  EXPECT_GE(s.samples, 5u);
  EXPECT_GT(s.size, 0u);  // the host's /dev/shm, seen through /proc/PID/root
  EXPECT_TRUE(exited || s.gone);
  if (exited) {
    EXPECT_EQ(code, 128 + SIGKILL);
  }
}

TEST(ShmSamplerTest, ANonexistentProcessEndsAtOnce) {
  // Pid 1 always exists; a huge pid never does (pid_max is at most 2^22).
  ShmSampleStats s = sample_shm_of_pid(1 << 23, SamplerOptions{});
  EXPECT_TRUE(s.gone);
  EXPECT_EQ(s.samples, 0u);
}

}  // namespace
}  // namespace gpurun
