#include "shm/perf_log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"

namespace gpurun {
namespace {

using test::fake_env;

TEST(PerfLogTest, RecordIsOneJsonLine) {
  PerfRecord r;
  r.time = "2026-12-02T15:48:08Z";
  r.engine = "docker";
  r.container = "abc";
  r.image = "img \"quoted\"";
  r.profile = "imagenet";
  r.gpus = 2;
  r.workers = 4;
  r.batch_size = 64;
  r.prefetch_factor = 2;
  r.planned_shm = 1000;
  r.applied_shm = 1000;
  r.shm_size = 1000;
  r.peak_shm = 600;
  r.burst_shm = 80;
  r.samples = 42;
  r.duration_s = 1.23456;
  r.exit_status = 137;
  const std::string line = perf_record_line(r);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2026-12-02T15:48:08Z");
  EXPECT_EQ(j["image"], "img \"quoted\"");
  EXPECT_EQ(j["profile"], "imagenet");
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["workers"], 4);
  EXPECT_EQ(j["batch_size"], 64);
  EXPECT_EQ(j["planned_shm"], 1000);
  EXPECT_EQ(j["peak_shm"], 600);
  EXPECT_EQ(j["burst_shm"], 80);
  EXPECT_EQ(j["exit_status"], 137);
  EXPECT_EQ(parse_perf_record(line, "log:1").burst_shm, 80u);
  // A line written before the burst was recorded reads as none.
  EXPECT_EQ(parse_perf_record(R"({"profile":"imagenet","peak_shm":600})", "log:2").burst_shm, 0u);
  EXPECT_DOUBLE_EQ(j["duration_s"].get<double>(), 1.235);
}

TEST(PerfLogTest, InvalidUtf8InTheImageStillGivesJson) {
  PerfRecord r;
  r.image = std::string("img\xff");
  EXPECT_NO_THROW(nlohmann::json::parse(perf_record_line(r)));
}

TEST(PerfLogTest, PathFollowsConfigThenXdgThenHome) {
  Config c;
  EXPECT_EQ(perf_log_path(c, fake_env({{"XDG_STATE_HOME", "/s"}, {"HOME", "/h"}})), "/s/gpu-run/perf.jsonl");
  EXPECT_EQ(perf_log_path(c, fake_env({{"HOME", "/h"}})), "/h/.local/state/gpu-run/perf.jsonl");
  EXPECT_EQ(perf_log_path(c, fake_env({{"XDG_STATE_HOME", "relative"}, {"HOME", "/h"}})),
            "/h/.local/state/gpu-run/perf.jsonl");
  EXPECT_THROW(perf_log_path(c, fake_env({})), Error);
  c.perf_log = "/var/log/gpu-run/perf.jsonl";
  EXPECT_EQ(perf_log_path(c, fake_env({{"XDG_STATE_HOME", "/s"}})), "/var/log/gpu-run/perf.jsonl");
}

TEST(PerfLogTest, AppendsWholeLinesAndCreatesTheDirectory) {
  const test::TempDir dir;
  const fs::path path = dir / "state" / "gpu-run" / "perf.jsonl";
  {
    UniqueFd fd = open_perf_log(path);
    append_perf_line(fd.get(), "{\"a\":1}\n", path);
  }
  {
    UniqueFd fd = open_perf_log(path);
    append_perf_line(fd.get(), "{\"a\":2}\n", path);
  }
  const std::string text = test::read_text(path);
  EXPECT_EQ(text, "{\"a\":1}\n{\"a\":2}\n");
}

TEST(PerfLogTest, UnwritableLogNamesThePath) {
  try {
    open_perf_log("/proc/gpu-run-no/perf.jsonl");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/gpu-run-no"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpurun
