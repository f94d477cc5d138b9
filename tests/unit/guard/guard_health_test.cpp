#include "guard/guard_health.hpp"

#include <gtest/gtest.h>

#include "support/test_util.hpp"

namespace gpurun {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A fake clock: instants `ms` after a start of its own.
struct FakeClock {
  GuardInstant start{std::chrono::steady_clock::time_point(std::chrono::hours(1000)),
                     std::chrono::system_clock::time_point(seconds(1700000000))};
  GuardInstant at(milliseconds ms) const { return {start.steady + ms, start.wall + ms}; }
};

TEST(GuardHealth, StaleAfterThreePeriodsAndAtLeastTenSeconds) {
  EXPECT_EQ(stale_after(milliseconds(10)), seconds(10));
  EXPECT_EQ(stale_after(milliseconds(2000)), seconds(10));
  EXPECT_EQ(stale_after(seconds(60)), seconds(180)) << "--interval 60000";
}

TEST(GuardHealth, HealthyAndReadyWhileBothLoopsMakePasses) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  for (int ms = 10; ms <= 60000; ms += 10) {
    p.sampled(clock.at(milliseconds(ms)));
    if (ms % 100 == 0) p.discovered(clock.at(milliseconds(ms)), milliseconds(100));
  }
  const HttpAnswer live = p.health(clock.at(milliseconds(60005)).steady, false);
  EXPECT_EQ(live.status, 200) << live.body;
  EXPECT_EQ(live.body,
            "ok\nsampler: last pass 0.005 s ago, stale after 10.000 s\n"
            "discovery: last pass 0.005 s ago, stale after 10.000 s\n");
  EXPECT_EQ(p.health(clock.at(milliseconds(60005)).steady, true).status, 200);
  EXPECT_DOUBLE_EQ(p.last_sample_seconds(), 1700000060.0);
  EXPECT_DOUBLE_EQ(p.last_discovery_seconds(), 1700000060.0);
}

TEST(GuardHealth, AStuckSamplerFailsTheProbeWhileTheDiscoveryRuns) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  p.sampled(clock.at(seconds(1)));  // then stuck (a remount that never returns)
  for (int ms = 100; ms <= 11000; ms += 100) p.discovered(clock.at(milliseconds(ms)), milliseconds(100));
  EXPECT_EQ(p.health(clock.at(seconds(11)).steady, false).status, 200) << "10 s old: not yet";
  const HttpAnswer a = p.health(clock.at(milliseconds(11001)).steady, false);
  EXPECT_EQ(a.status, 503);
  EXPECT_CONTAINS(a.body, "stale: sampler\n");
  EXPECT_CONTAINS(a.body, "sampler: last pass 10.001 s ago, stale after 10.000 s\n");
  EXPECT_EQ(a.body.find("stale: sampler, discovery"), std::string::npos) << a.body;
  EXPECT_EQ(p.health(clock.at(milliseconds(11001)).steady, true).status, 503) << "nor ready";
  EXPECT_DOUBLE_EQ(p.last_sample_seconds(), 1700000001.0) << "its timestamp stops with it";

  p.sampled(clock.at(seconds(12)));  // it came back
  EXPECT_EQ(p.health(clock.at(seconds(12)).steady, false).status, 200);
}

TEST(GuardHealth, AStuckDiscoveryFailsTheProbeWhileTheSamplerRuns) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  p.discovered(clock.at(milliseconds(100)), milliseconds(100));  // then stuck (an inspect that hangs)
  for (int ms = 10; ms <= 30000; ms += 10) p.sampled(clock.at(milliseconds(ms)));
  const HttpAnswer a = p.health(clock.at(seconds(30)).steady, false);
  EXPECT_EQ(a.status, 503);
  EXPECT_CONTAINS(a.body, "stale: discovery\n");
  EXPECT_CONTAINS(a.body, "discovery: last pass 29.900 s ago, stale after 10.000 s\n");
  EXPECT_CONTAINS(a.body, "sampler: last pass 0.000 s ago");
}

TEST(GuardHealth, BothStuckNamesBoth) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  p.sampled(clock.at(seconds(1)));
  p.discovered(clock.at(seconds(1)), milliseconds(100));
  EXPECT_CONTAINS(p.health(clock.at(seconds(20)).steady, false).body, "stale: sampler, discovery\n");
}

TEST(GuardHealth, TheThresholdFollowsTheIntervalAndThePollOrTheWatch) {
  const FakeClock clock;
  GuardProgress p(clock.start, seconds(60), milliseconds(2000));  // --interval 60000, polling
  p.sampled(clock.at(seconds(1)));
  p.discovered(clock.at(seconds(1)), milliseconds(2000));
  EXPECT_EQ(p.health(clock.at(seconds(9)).steady, false).status, 200);
  const HttpAnswer a = p.health(clock.at(seconds(12)).steady, false);
  EXPECT_EQ(a.status, 503) << "the poll stopped: 11 s";
  EXPECT_CONTAINS(a.body, "stale: discovery\n") << "a sample 11 s old is fresh at --interval 60000";
  EXPECT_CONTAINS(a.body, "sampler: last pass 11.000 s ago, stale after 180.000 s\n");
}

TEST(GuardHealth, StartingIsLiveButNotReadyUntilTheFirstPassOfEach) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  const HttpAnswer live = p.health(clock.at(milliseconds(50)).steady, false);
  EXPECT_EQ(live.status, 200) << "a guard starting is not restarted";
  EXPECT_CONTAINS(live.body, "sampler: no pass yet, 0.050 s after the start, stale after 10.000 s\n");
  HttpAnswer ready = p.health(clock.at(milliseconds(50)).steady, true);
  EXPECT_EQ(ready.status, 503);
  EXPECT_CONTAINS(ready.body, "starting: sampler, discovery\n");
  p.sampled(clock.at(milliseconds(60)));
  ready = p.health(clock.at(milliseconds(70)).steady, true);
  EXPECT_EQ(ready.status, 503);
  EXPECT_CONTAINS(ready.body, "starting: discovery\n");
  EXPECT_EQ(p.last_discovery_seconds(), 0) << "0 before the first pass";
  p.discovered(clock.at(milliseconds(80)), milliseconds(100));
  EXPECT_EQ(p.health(clock.at(milliseconds(90)).steady, true).status, 200);
}

TEST(GuardHealth, ALoopThatNeverMadeAPassIsStaleOnceTheGuardIsOldEnough) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  for (int ms = 10; ms <= 15000; ms += 10) p.sampled(clock.at(milliseconds(ms)));
  const HttpAnswer a = p.health(clock.at(seconds(15)).steady, false);
  EXPECT_EQ(a.status, 503);
  EXPECT_CONTAINS(a.body, "stale: discovery\n");
  EXPECT_CONTAINS(a.body, "discovery: no pass yet, 15.000 s after the start");
}

TEST(GuardHealth, AClockBehindTheLastPassIsNoNegativeAge) {
  const FakeClock clock;
  GuardProgress p(clock.start, milliseconds(10), milliseconds(100));
  p.sampled(clock.at(seconds(5)));
  p.discovered(clock.at(seconds(5)), milliseconds(100));
  const HttpAnswer a = p.health(clock.at(seconds(4)).steady, true);
  EXPECT_EQ(a.status, 200);
  EXPECT_CONTAINS(a.body, "sampler: last pass 0.000 s ago");
}

}  // namespace
}  // namespace gpurun
