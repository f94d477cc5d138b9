#include "guard/guard_perf_log.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/units.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

std::unique_ptr<ShmGrower> sampled_grower() {
  Config config;
  config.log_file = "";
  GuardLimits limits;
  limits.max_shm = 64 * kMiB;  // every growth blocked: no remount is tried
  auto g = std::make_unique<ShmGrower>(GuardPolicy{}, limits, config, "test: guard");
  g->on_sample(1, "c", ShmUsage{64 * kMiB, 8 * kMiB});
  g->on_sample(1, "c", ShmUsage{64 * kMiB, 30 * kMiB});
  g->on_sample(1, "c", ShmUsage{64 * kMiB, 2 * kMiB});
  return g;
}

TEST(GuardPerfLog, TheLineHoldsTheRecordedShapeThePeakAndNoExit) {
  ContainerInfo c;
  c.engine = "docker";
  c.id = "3f2a";
  c.image = "train:1";
  Recorded recorded;
  DecisionRecord d;
  d.profile = "vision/resnet50";
  d.gpus = 2;
  d.workers = 4;
  d.batch_size = 64;
  d.size = 48 * kMiB;
  recorded.record = d;
  const PerfRecord r = guarded_run_record(c, recorded, *sampled_grower(), 0);
  const nlohmann::json j = nlohmann::json::parse(perf_record_line(r));
  EXPECT_EQ(j["source"], "gpu-run-ctl guard");
  EXPECT_EQ(j["profile"], "vision/resnet50");
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["workers"], 4);
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["applied_shm"], 48 * kMiB);
  EXPECT_EQ(j["peak_shm"], 30 * kMiB);
  EXPECT_EQ(j["burst_shm"], 22 * kMiB);  // 8 -> 30 MiB between two samples
  EXPECT_EQ(j["shm_size"], 64 * kMiB);
  EXPECT_EQ(j["samples"], 3);
  EXPECT_TRUE(j["exit_status"].is_null());
  // What profiles learn reads back.
  const PerfRecord back = parse_perf_record(perf_record_line(r), "log:1");
  EXPECT_EQ(back.peak_shm, 30 * kMiB);
  EXPECT_EQ(back.burst_shm, 22 * kMiB);
  EXPECT_FALSE(back.exit_status);
}

TEST(GuardPerfLog, AnUnwritableLogIsOneWarningNotAThrow) {
  ContainerInfo c;
  c.id = "3f2a";
  c.labels = {{"gpu-run.shm-size", "64m"}};  // the old keys: gpu-run sized it
  GuardPerfLog log("/proc/gpu-run-no/perf.jsonl");
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(log.on_end(c, *sampled_grower()));
  EXPECT_NO_THROW(log.on_end(c, *sampled_grower()));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no line in the performance log for container 3f2a"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "warned once: " << err;
}

TEST(GuardPerfLog, AppendsOneLineAContainerGpuRunSized) {
  test::TempDir dir;
  ContainerInfo c;
  c.id = "3f2a";
  c.labels = {{"gpu-run.shm-size", "64m"}};
  ContainerInfo other;  // not sized by gpu-run (guarded with --all): no line
  other.id = "9e1b";
  const fs::path path = dir / "perf.jsonl";
  GuardPerfLog log(path);
  log.on_end(c, *sampled_grower());
  log.on_end(other, *sampled_grower());
  log.on_end(c, *sampled_grower());
  const std::string text = test::read_text(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

}  // namespace
}  // namespace gpurun
