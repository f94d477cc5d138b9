#include "ctl/profiles/learn.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/units.hpp"
#include "ctl/profiles/calibrate.hpp"
#include "decision/sizing.hpp"
#include "profiles/profile.hpp"

namespace gpurun {
namespace {

// The built-in default's keys that matter here, min_shm low so that the plan shows the need.
Profile default_like() {
  Profile p;
  p.name = "guess";
  p.fields = {{"image", {3, 224, 224}, "float32"}, {"label", {}, "int64"}};
  p.batch_size = 32;
  p.prefetch_factor = 2;
  p.pin_memory = true;
  p.headroom = 1.05;
  p.min_shm = kMiB;
  p.max_shm = 256 * kGiB;
  return p;
}

PerfRecord run(std::uint64_t peak, std::uint64_t workers, std::uint64_t batch, unsigned gpus = 0, int exit = 0) {
  PerfRecord r;
  r.profile = "guess";
  r.peak_shm = peak;
  r.workers = workers;
  r.batch_size = batch;
  r.gpus = gpus;
  r.prefetch_factor = 2;
  r.exit_status = exit;
  return r;
}

SizingRequest shape(const PerfRecord& r) {
  SizingRequest q;
  q.gpus = r.gpus;
  q.workers = r.workers;
  q.batch_size = r.batch_size;
  q.prefetch_factor = r.prefetch_factor;
  q.guarded = true;  // learn fits the plan a guarded run starts at (plan_unguarded: the other)
  return q;
}

std::uint64_t margin(const Profile& p, std::uint64_t peak) {
  return static_cast<std::uint64_t>(std::ceil(static_cast<long double>(peak) * p.headroom));
}

TEST(LearnTest, ARunBelowThePlanPlansItsShapeAtLeastItsPeakAndBelowTheUnlearnedPlan) {
  const Profile p = default_like();
  const PerfRecord r = run(40 * kMiB, 4, 32);
  const std::uint64_t unlearned = plan_shm(p, shape(r)).shm;
  ASSERT_GT(unlearned, margin(p, r.peak_shm));  // the guess is larger than what the job used
  const Learned l = learn_calibration(p, {{r, "perf.jsonl:1"}}, "2026-12-06T00:00:00Z");
  ASSERT_TRUE(l.calibration);
  EXPECT_EQ(l.calibration->peak_shm, r.peak_shm);
  const ShmPlan learned = plan_shm(calibrated_profile(p.name, p, *l.calibration), shape(r));
  EXPECT_GE(learned.need, margin(p, r.peak_shm));
  EXPECT_LT(learned.shm, unlearned);
  ASSERT_EQ(l.runs.size(), 1u);
  EXPECT_EQ(l.runs[0].plan_before, unlearned);
  EXPECT_EQ(l.runs[0].plan_after, learned.shm);
}

TEST(LearnTest, ARunAboveThePlanRaisesIt) {
  const Profile p = default_like();
  const PerfRecord r = run(900 * kMiB, 2, 32);
  ASSERT_LT(plan_shm(p, shape(r)).need, margin(p, r.peak_shm));
  const Learned l = learn_calibration(p, {{r, "perf.jsonl:1"}}, "t");
  ASSERT_TRUE(l.calibration);
  EXPECT_GE(plan_shm(calibrated_profile(p.name, p, *l.calibration), shape(r)).need, margin(p, r.peak_shm));
}

TEST(LearnTest, EveryUsedRunIsCoveredWhateverItsShape) {
  const Profile p = default_like();
  // Per sample, the second run (2 ranks, 8 workers) used less than the first; the third more.
  const std::vector<LoggedRun> runs = {
      {run(60 * kMiB, 2, 32), "a:1"}, {run(200 * kMiB, 8, 16, 2), "a:2"}, {run(30 * kMiB, 1, 64, 1), "b:1"}};
  const Learned l = learn_calibration(p, runs, "t");
  ASSERT_TRUE(l.calibration);
  const Profile learned = calibrated_profile(p.name, p, *l.calibration);
  for (const LoggedRun& r : runs) {
    SCOPED_TRACE(r.where);
    EXPECT_GE(plan_shm(learned, shape(r.record)).need, margin(p, r.record.peak_shm));
  }
  // The least that covers them: a calibration 5% smaller leaves one run short.
  Calibration smaller = *l.calibration;
  smaller.peak_shm = smaller.peak_shm * 95 / 100;
  const Profile short_profile = calibrated_profile(p.name, p, smaller);
  bool one_short = false;
  for (const LoggedRun& r : runs)
    one_short |= plan_shm(short_profile, shape(r.record)).need < margin(p, r.record.peak_shm);
  EXPECT_TRUE(one_short);
}

// gpu-run --gpu-request none --gpus 2: a pinned loader without a pin thread holds batches in
// /dev/shm; learned, the plan of that request is as tight as one whose GPUs reach it.
TEST(LearnTest, ARunWhoseGpusDidNotReachItIsPlannedAsItRan) {
  const Profile p = default_like();
  PerfRecord r = run(120 * kMiB, 2, 32, 2);
  r.pin_thread = false;
  const Learned l = learn_calibration(p, {{r, "a:1"}}, "t");
  ASSERT_TRUE(l.calibration);
  EXPECT_FALSE(l.calibration->pin_memory) << "measured without a pin thread";
  SizingRequest none = shape(r);
  none.gpu_reach = GpuReach::none;
  const ShmPlan plan = plan_shm(calibrated_profile(p.name, p, *l.calibration), none);
  EXPECT_GE(plan.need, margin(p, r.peak_shm));
  // A calibrated plan keeps a headroom of at least 1.25 (sizing.cpp: a sampled peak is not a
  // bound); counted with a pin thread it had not, the plan would be 7/4 of that.
  EXPECT_LT(plan.need, r.peak_shm * 125 / 100 + 2 * kMiB) << "no batches counted twice";
}

// The run's burst (its largest rise between two samples) is kept with the peak: the plan of its
// shape is then the peak plus one burst, at least 1.15x and at most 1.25x the peak; a line without
// one (written before bursts were recorded) keeps 1.25x.
TEST(LearnTest, TheRunsBurstSetsTheMarginOverItsPeak) {
  const Profile p = default_like();
  PerfRecord r = run(400 * kMiB, 4, 32);
  const auto need_at = [&](const PerfRecord& rec) {
    const Learned l = learn_calibration(p, {{rec, "a:1"}}, "t");
    EXPECT_TRUE(l.calibration);
    if (!l.calibration) return std::uint64_t{0};
    EXPECT_EQ(l.calibration->burst_shm, rec.burst_shm ? std::optional<std::uint64_t>(rec.burst_shm) : std::nullopt);
    return plan_shm(calibrated_profile(p.name, p, *l.calibration), shape(rec)).need;
  };
  const std::uint64_t without = need_at(r);
  EXPECT_GE(without, 500 * kMiB);
  EXPECT_LE(without, 500 * kMiB + 2 * kMiB);
  r.burst_shm = 72 * kMiB;  // 18% of the peak
  const std::uint64_t with_burst = need_at(r);
  EXPECT_GE(with_burst, 472 * kMiB);
  EXPECT_LE(with_burst, 472 * kMiB + 2 * kMiB);
  r.burst_shm = 8 * kMiB;  // many small batches: the floor
  const std::uint64_t small_burst = need_at(r);
  EXPECT_GE(small_burst, 460 * kMiB) << "never below the peak x 1.15";
  EXPECT_LE(small_burst, 460 * kMiB + 2 * kMiB);
  r.burst_shm = 300 * kMiB;  // most of the peak at once: no more than 1.25
  EXPECT_EQ(need_at(r), without);
}

// Where no guard runs, a plan learned from one run keeps 1.55x its peak: a job's peak moves by up
// to 1.54x between runs (bench/guard/peak_spread.py), and nothing grows /dev/shm for the run that
// goes higher. learn shows both plans.
TEST(LearnTest, WithoutAGuardTheLearnedPlanKeepsTheWideHeadroom) {
  const Profile p = default_like();
  PerfRecord r = run(400 * kMiB, 4, 32);
  r.burst_shm = 8 * kMiB;
  const Learned l = learn_calibration(p, {{r, "a:1"}}, "t");
  ASSERT_TRUE(l.calibration);
  ASSERT_EQ(l.runs.size(), 1u);
  EXPECT_GE(l.runs[0].plan_after, 460 * kMiB);
  EXPECT_LE(l.runs[0].plan_after, 462 * kMiB);
  EXPECT_GE(l.runs[0].plan_unguarded, 620 * kMiB) << "400 MiB x 1.55";
  EXPECT_LE(l.runs[0].plan_unguarded, 622 * kMiB);
  SizingRequest q = shape(r);
  q.guarded = false;
  const ShmPlan unguarded = plan_shm(calibrated_profile(p.name, p, *l.calibration), q);
  EXPECT_EQ(unguarded.shm, l.runs[0].plan_unguarded);
  ASSERT_TRUE(unguarded.guarded_headroom);
  EXPECT_EQ(*unguarded.guarded_headroom, 1.15);
  EXPECT_EQ(unguarded.headroom, kUnguardedLearnedHeadroom);
}

TEST(LearnTest, ARunThatDidNotEndWellTeachesNothing) {
  const Profile p = default_like();
  const Learned l = learn_calibration(
      p, {{run(5 * kMiB, 2, 32, 0, 135), "a:1"}, {run(0, 2, 32), "a:2"}, {run(5 * kMiB, 0, 32), "a:3"}}, "t");
  EXPECT_FALSE(l.calibration);
  ASSERT_EQ(l.runs.size(), 3u);
  EXPECT_NE(l.runs[0].skipped.find("exit 135"), std::string::npos);
  EXPECT_NE(l.runs[1].skipped.find("no peak"), std::string::npos);
  EXPECT_NE(l.runs[2].skipped.find("workers 0"), std::string::npos);
}

TEST(LearnTest, TheNodeGuardsRunsWithoutAnExitAreUsed) {
  const Profile p = default_like();
  PerfRecord r = run(50 * kMiB, 2, 32);
  r.exit_status.reset();
  const Learned l = learn_calibration(p, {{r, "guard:1"}}, "t");
  ASSERT_TRUE(l.calibration);
  EXPECT_TRUE(l.runs[0].skipped.empty());
}

TEST(LearnTest, AProfileThatDescribesItsFirstLoaderIsRefused) {
  Profile p = default_like();
  Loader train;
  train.name = "train";
  train.fields = p.fields;
  p.loaders = {train};
  try {
    learn_calibration(p, {{run(50 * kMiB, 2, 32), "a:1"}}, "t");
    FAIL() << "learned a calibration the plan ignores";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("loaders[0].fields"), std::string::npos);
  }
}

TEST(LearnTest, RunsOfOneProfileAreReadFromTheLogWithTheirLines) {
  PerfRecord a = run(10 * kMiB, 2, 32);
  PerfRecord b = a;
  b.profile = "other";
  PerfRecord c = a;
  c.exit_status.reset();
  c.source = "gpu-run-ctl guard";
  const std::string text = perf_record_line(a) + "\n" + perf_record_line(b) + perf_record_line(c);
  const std::vector<LoggedRun> runs = runs_of_profile(text, "perf.jsonl", "guess");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].where, "perf.jsonl:1");
  EXPECT_EQ(runs[0].record.peak_shm, 10 * kMiB);
  EXPECT_EQ(runs[0].record.exit_status, 0);
  EXPECT_EQ(runs[1].where, "perf.jsonl:4");
  EXPECT_FALSE(runs[1].record.exit_status);
  EXPECT_EQ(runs[1].record.source, "gpu-run-ctl guard");
}

TEST(LearnTest, ALineThatIsNotARecordNamesItsPlace) {
  try {
    runs_of_profile("{\"profile\": \"guess\", \"peak_shm\": -1}\n", "perf.jsonl", "guess");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("perf.jsonl:1"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("peak_shm"), std::string::npos);
  }
  EXPECT_THROW(runs_of_profile("not json\n", "perf.jsonl", "guess"), Error);
}

}  // namespace
}  // namespace gpurun
