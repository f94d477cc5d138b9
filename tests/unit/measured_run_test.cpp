#include "measured_run.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "record.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

// A stand-in for docker: `run --cidfile P ...` writes the cidfile and lives for a while as
// the "container"; `inspect` reports its own pid as the container's.
class FakeEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpu-run-measure-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    engine_ = dir_ / "engine";
    std::ofstream(engine_) << "#!/bin/sh\n"
                              "d=$(dirname \"$0\")\n"
                              "case \"$1\" in\n"
                              "run)\n"
                              "  [ \"$2\" = --cidfile ] || exit 90\n"
                              "  echo $$ > \"$d/pid\"\n"
                              "  printf feedfacefeedfacefeed > \"$3\"\n"
                              "  sleep 0.3\n"
                              "  exit 7;;\n"
                              "inspect)\n"
                              "  printf '[{\"Id\":\"feedfacefeedfacefeed\",\"State\":{\"Running\":true,\"Pid\":%s}}]' "
                              "\"$(cat \"$d/pid\")\";;\n"
                              "esac\n";
    ::chmod(engine_.c_str(), 0755);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_, engine_;
};

TEST_F(FakeEngine, SamplesTheContainerAndKeepsTheExitCode) {
  MeasureOptions o;
  o.output = dir_ / "out.log";
  MeasuredRun run = run_measured({engine_.string(), "run", "img"}, engine_.string(), o);
  EXPECT_EQ(run.exit_code, 7);
  EXPECT_EQ(run.container_id, "feedfacefeedfacefeed");
  EXPECT_TRUE(run.container_seen);
  EXPECT_GE(run.shm.samples, 3u);
  EXPECT_GT(run.shm.size, 0u);
  EXPECT_GE(run.wall_seconds, 0.25);
  EXPECT_TRUE(run.sample_error.empty()) << run.sample_error;
}

TEST_F(FakeEngine, AnEngineThatNeverCreatesAContainer) {
  MeasureOptions o;
  o.output = dir_ / "out.log";
  MeasuredRun run = run_measured({"sh", "-c", "exit 3"}, "false", o);
  // with_cidfile puts --cidfile after argv[1], so sh sees "-c --cidfile": it fails, exit 2 (or 127).
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(run.container_seen);
  EXPECT_EQ(run.shm.samples, 0u);
}

TEST(MeasuredRunTest, CidfileGoesAfterRun) {
  EXPECT_EQ(with_cidfile({"docker", "run", "--rm", "img"}, "/t/cid"),
            (Args{"docker", "run", "--cidfile", "/t/cid", "--rm", "img"}));
}

TEST(MeasuredRunTest, FindsTheUsersCidfile) {
  EXPECT_EQ(find_cidfile_option({"--rm", "--cidfile", "/x"}), std::optional<std::string>("/x"));
  EXPECT_EQ(find_cidfile_option({"--cidfile=/y"}), std::optional<std::string>("/y"));
  EXPECT_EQ(find_cidfile_option({"--rm", "-e", "A=1"}), std::nullopt);
}

TEST(MeasuredRunTest, DetectsDetach) {
  EXPECT_TRUE(detaches({"-d"}));
  EXPECT_TRUE(detaches({"--rm", "-dit"}));
  EXPECT_TRUE(detaches({"-itd"}));
  EXPECT_TRUE(detaches({"--detach"}));
  EXPECT_FALSE(detaches({"-it", "--rm"}));
  EXPECT_FALSE(detaches({"-e", "D=1"}));
  EXPECT_FALSE(detaches({"--detach-keys", "ctrl-x"}));
  // -e takes the rest as its value: "-edit" sets the variable "dit".
  EXPECT_FALSE(detaches({"-edit"}));
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
