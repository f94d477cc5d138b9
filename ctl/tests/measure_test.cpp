// The pure parts of watch, calibrate and tune.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "calibrate.hpp"
#include "error.hpp"
#include "run_options.hpp"
#include "tune.hpp"
#include "units.hpp"
#include "watch.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

TEST(TuneTest, SubstitutesEveryPlaceholder) {
  EXPECT_EQ(substitute_workers({"train.py", "--workers", "{workers}", "--tag=w{workers}-{workers}"}, 4),
            (Args{"train.py", "--workers", "4", "--tag=w4-4"}));
  EXPECT_EQ(substitute_workers({"{workers}{workers}"}, 12), (Args{"1212"}));
  EXPECT_EQ(substitute_workers({"{worker}", "{WORKERS}"}, 3), (Args{"{worker}", "{WORKERS}"}));
  EXPECT_TRUE(has_workers_placeholder({"a", "--w={workers}"}));
  EXPECT_FALSE(has_workers_placeholder({"a", "{worker}"}));
}

TEST(TuneTest, ParsesCounts) {
  EXPECT_EQ(parse_counts("0,1,2,4,8"), (std::vector<std::uint64_t>{0, 1, 2, 4, 8}));
  EXPECT_EQ(parse_counts("3"), (std::vector<std::uint64_t>{3}));
  for (const char* bad : {"", "1,,2", "1,2,", "a", "-1", "1,1", "2000", "1 2"}) {
    try {
      parse_counts(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_CONTAINS(e.what(), "--counts");
      EXPECT_EQ(e.exit_code(), kExitUsage);
    }
  }
}

TEST(TuneTest, DefaultCountsStopAtTheCpus) {
  EXPECT_EQ(default_counts(2), (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(default_counts(1), (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(default_counts(6), (std::vector<std::uint64_t>{0, 1, 2, 4}));
  EXPECT_EQ(default_counts(64), (std::vector<std::uint64_t>{0, 1, 2, 4, 8}));
}

TuneResult result(std::uint64_t workers, double wall, std::uint64_t peak, std::uint64_t planned, int exit_code = 0) {
  TuneResult r;
  r.workers = workers;
  r.ran = true;
  r.wall_s = wall;
  r.peak_shm = peak;
  r.planned_shm = planned;
  r.exit_code = exit_code;
  return r;
}

TEST(TuneTest, RecommendsTheFastestWithinBudget) {
  std::vector<TuneResult> rs = {result(0, 10, 0, 256 * kMiB), result(1, 6, 50 * kMiB, 256 * kMiB),
                                result(2, 4, 300 * kMiB, 256 * kMiB),    // over its budget
                                result(4, 3, 10 * kMiB, 512 * kMiB, 1),  // failed
                                result(8, 5, 100 * kMiB, 512 * kMiB)};
  auto best = recommend(rs);
  ASSERT_TRUE(best);
  EXPECT_EQ(rs[*best].workers, 8u);
  EXPECT_FALSE(recommend({result(1, 1, 2, 1)}));
  TuneResult not_run;
  not_run.workers = 16;
  not_run.problem = "does not fit";
  EXPECT_FALSE(recommend({not_run}));
}

TEST(TuneTest, TableAndJson) {
  std::vector<TuneResult> rs = {result(0, 10, 0, 256 * kMiB), result(2, 5, 100 * kMiB, 256 * kMiB)};
  TuneResult failed = result(4, 2, 10 * kMiB, 512 * kMiB, 1);
  failed.problem = "RuntimeError: DataLoader worker (pid(s) 12) exited unexpectedly";
  rs.push_back(failed);
  const auto best = recommend(rs);
  const std::string ascii = tune_table(rs, best, false);
  EXPECT_CONTAINS(ascii, "workers  wall time");
  EXPECT_CONTAINS(ascii, std::string(30, '#'));  // the slowest run fills the bar
  EXPECT_CONTAINS(ascii, "ok *");
  EXPECT_CONTAINS(ascii, "exit 1");
  EXPECT_CONTAINS(ascii, "exited unexpectedly");
  EXPECT_CONTAINS(tune_table(rs, best, true), "█");
  EXPECT_CONTAINS(tune_recommendation(rs, best), "recommended: --workers 2 (5.0s, 2.00x faster than --workers 0");
  const auto j = nlohmann::json::parse(tune_json(rs, best).dump());
  EXPECT_EQ(j["recommended_workers"], 2);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][1]["peak_shm"], 100 * kMiB);
  EXPECT_EQ(j["runs"][2]["ok"], false);
  EXPECT_EQ(j["runs"][2]["exit_status"], 1);
  EXPECT_TRUE(tune_json({}, std::nullopt)["recommended_workers"].is_null());
}

TEST(RunOptionsTest, SplitsTheTailAndAddsRm) {
  RunOptions o;
  o.sizing.profile = "imagenet";
  o.args = {"-v", "/d:/d", "--batch-size", "16", "img", "python3", "train.py", "--workers", "{workers}"};
  WrapperOptions w = wrapper_options_for(o, "tune");
  EXPECT_EQ(w.image, "img");
  EXPECT_EQ(w.command, (Args{"python3", "train.py", "--workers", "{workers}"}));
  EXPECT_EQ(w.engine_options, (Args{"--rm", "-v", "/d:/d"}));
  EXPECT_EQ(w.sizing.profile, std::optional<std::string>("imagenet"));
  EXPECT_EQ(w.sizing.batch_size, std::optional<std::string>("16"));
  o.args = {"--rm=false", "img"};
  EXPECT_EQ(wrapper_options_for(o, "tune").engine_options, (Args{"--rm=false"}));
}

TEST(RunOptionsTest, UserErrorsNameTheFlag) {
  RunOptions o;
  try {
    wrapper_options_for(o, "calibrate");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "missing IMAGE");
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
  o.sizing.batch_size = "8";
  o.args = {"--batch-size", "16", "img"};
  try {
    wrapper_options_for(o, "tune");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "--batch-size");
  }
}

Profile base_profile() {
  Profile p;
  p.name = "default";
  p.fields = {{"image", {3, 224, 224}, "float32"}, {"label", {}, "int64"}};
  p.batch_size = 32;
  p.prefetch_factor = 2;
  p.pin_memory = true;
  p.headroom = 1.25;
  p.nccl_reserve = 512 * kMiB;
  p.min_shm = 64 * kMiB;
  p.max_shm = 256 * kGiB;
  return p;
}

Calibration measured() {
  Calibration c;
  c.peak_shm = 300 * kMiB;
  c.workers = 2;
  c.batch_size = 96;
  c.gpus = 0;
  c.prefetch_factor = 2;
  c.pin_memory = true;
  c.measured_at = "2026-12-02T15:48:08Z";
  return c;
}

TEST(CalibrateTest, DocumentExtendsTheBaseAndValidates) {
  const auto doc =
      calibrated_profile_document("team/mine", "measured", base_profile(), std::string("default"), measured());
  const std::string text = doc.dump(2);
  const auto parsed = parse_profile_document(text, "mine.json");
  EXPECT_EQ(parsed["extends"], "default");
  EXPECT_EQ(parsed["batch_size"], 96);
  EXPECT_EQ(parsed["workers_per_gpu"], 2);
  EXPECT_EQ(parsed["prefetch_factor"], 2);
  EXPECT_EQ(parsed["calibration"]["peak_shm"], 300 * kMiB);
  EXPECT_FALSE(parsed.contains("fields"));
  // The keys come in a person's order: name first, calibration last.
  EXPECT_LT(text.find("\"name\""), text.find("\"extends\""));
  EXPECT_LT(text.find("\"extends\""), text.find("\"calibration\""));
}

TEST(CalibrateTest, DocumentInlinesABaseWithoutAName) {
  const auto doc = calibrated_profile_document("mine", "measured", base_profile(), std::nullopt, measured());
  const auto parsed = parse_profile_document(doc.dump(), "mine.json");
  EXPECT_FALSE(parsed.contains("extends"));
  // Complete on its own: it loads without a parent.
  const Profile p = profile_from_document(parsed, "mine.json");
  ASSERT_TRUE(p.calibration);
  EXPECT_EQ(p.calibration->peak_shm, 300 * kMiB);
  EXPECT_EQ(p.fields.size(), 2u);
}

TEST(CalibrateTest, PlanForTheMeasuredJobIsTheHeadroomTimesThePeak) {
  const Profile p = calibrated_profile("mine", base_profile(), measured());
  SizingRequest r;
  const ShmPlan plan = plan_shm(p, r);
  EXPECT_TRUE(plan.calibrated);
  EXPECT_EQ(plan.workers, 2u);
  EXPECT_EQ(plan.batch_size, 96u);
  EXPECT_GE(plan.shm, 300 * kMiB * 5 / 4);
  EXPECT_LE(plan.shm, 300 * kMiB * 5 / 4 + 2 * kMiB);
  // Twice the batch: twice the shm.
  r.batch_size = 192;
  EXPECT_NEAR(static_cast<double>(plan_shm(p, r).need), 2.0 * static_cast<double>(plan.need), 2.0 * kMiB);
}

TEST(CalibrateTest, GenerousShm) {
  HostInfo host;
  host.mem_available = 20 * kGiB;
  ShmPlan plan;
  plan.shm = 300 * kMiB;
  EXPECT_EQ(generous_shm(host, plan, std::nullopt), 10 * kGiB);
  host.mem_available = 64 * kGiB;
  EXPECT_EQ(generous_shm(host, plan, std::nullopt), 16 * kGiB);
  EXPECT_EQ(generous_shm(host, plan, 4 * kGiB), 4 * kGiB);
  plan.shm = 20 * kGiB;  // never below the plan
  EXPECT_EQ(generous_shm(host, plan, std::nullopt), 20 * kGiB);
}

TEST(WatchTest, BarAndJsonLines) {
  const ShmUsage u{100 * kMiB, 25 * kMiB};
  const std::string line = watch_bar_line(u, 50 * kMiB, 1.25, 20);
  EXPECT_CONTAINS(line, "[#####....|..........]");
  EXPECT_CONTAINS(line, "25MiB / 100MiB");
  EXPECT_CONTAINS(line, "peak 50MiB");
  const auto j = nlohmann::json::parse(watch_sample_json(0.5, u, 50 * kMiB));
  EXPECT_EQ(j["event"], "sample");
  EXPECT_EQ(j["used"], 25 * kMiB);
  EXPECT_EQ(j["size"], 100 * kMiB);
  EXPECT_EQ(j["peak"], 50 * kMiB);
  ShmSampleStats s;
  s.peak = 50 * kMiB;
  s.size = 100 * kMiB;
  s.samples = 101;
  s.seconds = 1.0;
  const auto sum = watch_summary_json("c1", s, true);
  EXPECT_EQ(sum["event"], "summary");
  EXPECT_EQ(sum["rate_hz"], 100.0);
  EXPECT_EQ(sum["peak_fraction"], 0.5);
  EXPECT_CONTAINS(watch_summary_text("c1", s, true),
                  "container c1 exited: peak /dev/shm 50MiB of 100MiB (50.0%), 101 samples");
}

}  // namespace
}  // namespace gpurun
