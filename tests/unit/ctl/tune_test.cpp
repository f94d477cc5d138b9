#include "tune.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error.hpp"
#include "test_util.hpp"
#include "units.hpp"

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

}  // namespace
}  // namespace gpurun
