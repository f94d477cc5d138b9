#include "engine/measured_run.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "support/test_files.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

// A stand-in for docker: `run --cidfile P ...` writes the cidfile and lives for a while as
// the "container"; `inspect` reports its own pid as the container's.
class FakeEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = dir_ / "engine";
    std::ofstream(engine_) << "#!/bin/sh\n"
                              "d=$(dirname \"$0\")\n"
                              "case \"$1\" in\n"
                              "run)\n"
                              "  [ \"$2\" = --cidfile ] || exit 90\n"
                              "  echo $$ > \"$d/pid\"\n"
                              "  printf feedfacefeedfacefeed > \"$3\"\n"
                              // 2 s, not 0.3: a loaded machine once started sampling too late for 3 samples
                              "  sleep 2\n"
                              "  exit 7;;\n"
                              "inspect)\n"
                              "  printf '[{\"Id\":\"feedfacefeedfacefeed\",\"State\":{\"Running\":true,\"Pid\":%s}}]' "
                              "\"$(cat \"$d/pid\")\";;\n"
                              "esac\n";
    ::chmod(engine_.c_str(), 0755);
  }

  const test::TempDir tmp_;
  const fs::path dir_ = tmp_.path();
  fs::path engine_;
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

}  // namespace
}  // namespace gpurun
