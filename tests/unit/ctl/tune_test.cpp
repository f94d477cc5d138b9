#include "ctl/profiles/tune.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

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
  EXPECT_CONTAINS(ascii, "workers  wall time  spread");
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

TuneResult repeated(std::uint64_t workers, std::vector<double> walls) {
  TuneResult r = result(workers, 0, 0, 256 * kMiB);
  for (double w : walls) r.add_run(w);
  return r;
}

TEST(TuneTest, MedianAndSpreadOfTheRuns) {
  const TuneResult r = repeated(1, {0.41, 0.30, 0.33});
  EXPECT_DOUBLE_EQ(r.wall_s, 0.33);
  EXPECT_NEAR(r.spread_s(), 0.11, 1e-9);
  EXPECT_DOUBLE_EQ(repeated(1, {1, 2, 4, 3}).wall_s, 2.5);
  EXPECT_DOUBLE_EQ(repeated(1, {7}).spread_s(), 0);
}

TEST(TuneTest, NoRecommendationOnNoise) {
  // `sh -c 'exit 0'`: the counts differ by less than their runs do.
  std::vector<TuneResult> rs = {repeated(0, {0.40, 0.31, 0.35}), repeated(1, {0.29, 0.36, 0.31}),
                                repeated(2, {0.33, 0.30, 0.42})};
  EXPECT_FALSE(recommend(rs));
  EXPECT_EQ(within_spread_of_fastest(rs), (std::vector<std::size_t>{1, 0, 2}));
  const std::string line = tune_recommendation(rs, recommend(rs));
  EXPECT_CONTAINS(line, "no recommendation: --workers 1, 0 and 2 take 0.3s, 0.3s and 0.3s (medians)");
  EXPECT_CONTAINS(line, "noise");
  EXPECT_NOT_CONTAINS(line, "faster");
  const auto j = nlohmann::json::parse(tune_json(rs, recommend(rs)).dump());
  EXPECT_TRUE(j["recommended_workers"].is_null());
  EXPECT_EQ(j["within_spread_of_fastest"], nlohmann::json::parse("[1,0,2]"));
  EXPECT_EQ(j["runs"][0]["runs_s"].size(), 3u);
  EXPECT_NEAR(j["runs"][0]["spread_s"].get<double>(), 0.09, 1e-9);
  EXPECT_CONTAINS(tune_table(rs, std::nullopt, false), "   0.1s");
}

TEST(TuneTest, RecommendsWhenTheDifferenceExceedsTheSpread) {
  std::vector<TuneResult> rs = {repeated(0, {10.0, 10.2, 9.9}), repeated(2, {5.0, 5.1, 4.9}),
                                repeated(4, {5.6, 5.5, 5.7})};
  const auto best = recommend(rs);
  ASSERT_TRUE(best);
  EXPECT_EQ(rs[*best].workers, 2u);
  EXPECT_CONTAINS(tune_recommendation(rs, best), "recommended: --workers 2 (5.0s");
  rs[2] = repeated(4, {5.3, 5.0, 5.6});  // 0.3s slower at the median, its runs 0.6s apart
  EXPECT_FALSE(recommend(rs));
}

}  // namespace
}  // namespace gpurun
