#include "engine/record.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(MeasuredRunTest, ADetachedJobIsSentWhereItsNeedIsMet) {
  EngineInvocation inv;
  inv.engine = "docker";
  WrapperOptions o;
  o.image = "train:1";
  o.engine_options = {"-d"};
  o.guard = true;
  // watch does not grow /dev/shm: a detached job that should grow has the node guard.
  Error e = expect_error([&] { run_recorded(inv, o, Config{}); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--guard: the container would run detached");
  EXPECT_CONTAINS(e.what(), "gpu-run-ctl guard");
  EXPECT_NOT_CONTAINS(e.what(), "watch");
  o.guard = false;
  o.record = true;
  EXPECT_CONTAINS(expect_error([&] { run_recorded(inv, o, Config{}); }).what(), "gpu-run-ctl watch");
}

TEST(MeasuredRunTest, RecordCarriesPlanAndMeasurement) {
  EngineInvocation inv;
  inv.engine = "docker";
  inv.plan.profile = "imagenet";
  inv.plan.gpus = 2;
  inv.plan.workers = 3;
  inv.plan.batch_size = 64;
  inv.plan.prefetch_factor = 2;
  inv.plan.shm = 500;
  inv.applied_shm = 400;
  WrapperOptions o;
  o.image = "train:1";
  MeasuredRun run;
  run.exit_code = 1;
  run.container_id = "abc";
  run.shm.peak = 300;
  run.shm.size = 400;
  run.shm.samples = 9;
  run.wall_seconds = 2.5;
  const auto j = nlohmann::json::parse(perf_record_line(make_perf_record(inv, o, run, 0)));
  EXPECT_EQ(j["time"], "1970-01-01T00:00:00Z");
  EXPECT_EQ(j["image"], "train:1");
  EXPECT_EQ(j["profile"], "imagenet");
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["workers"], 3);
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["planned_shm"], 500);
  EXPECT_EQ(j["applied_shm"], 400);
  EXPECT_EQ(j["peak_shm"], 300);
  EXPECT_EQ(j["exit_status"], 1);
  EXPECT_EQ(j["container"], "abc");
}

}  // namespace
}  // namespace gpurun
