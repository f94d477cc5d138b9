#include "engine/run_args.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

TEST(RunArgsTest, SplitsOwnOptionsEngineOptionsImageAndCommand) {
  WrapperOptions o = split_wrapper_args({"--profile", "imagenet", "-it", "--rm", "-v", "/a:/b", "--gpus=2", "--env=X=1",
                                         "-e", "Y=2", "img", "python", "train.py", "--gpus", "3"});
  EXPECT_EQ(o.sizing.profile, "imagenet");
  EXPECT_EQ(o.sizing.gpus, "2");
  EXPECT_EQ(o.engine_options, (Args{"-it", "--rm", "-v", "/a:/b", "--env=X=1", "-e", "Y=2"}));
  EXPECT_EQ(o.image, "img");
  EXPECT_EQ(o.command, (Args{"python", "train.py", "--gpus", "3"}));
}

TEST(RunArgsTest, ShortClustersAndGluedValues) {
  WrapperOptions o = split_wrapper_args({"-itv", "/x:/y", "-eFOO=1", "-d", "img"});
  EXPECT_EQ(o.engine_options, (Args{"-itv", "/x:/y", "-eFOO=1", "-d"}));
  EXPECT_EQ(o.image, "img");
  EXPECT_TRUE(o.command.empty());
}

TEST(RunArgsTest, ValueOptionsTakeTheNextArgumentEvenIfItLooksLikeAnImage) {
  WrapperOptions o = split_wrapper_args({"--name", "job", "--shm-size", "1g", "--workers", "4", "img"});
  EXPECT_EQ(o.engine_options, (Args{"--name", "job", "--shm-size", "1g"}));
  EXPECT_EQ(o.sizing.workers, "4");
  EXPECT_EQ(o.image, "img");
}

TEST(RunArgsTest, DoubleDashEndsOptions) {
  WrapperOptions o = split_wrapper_args({"--dry-run", "--", "img", "--rm"});
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.image, "img");
  EXPECT_EQ(o.command, (Args{"--rm"}));
}

TEST(RunArgsTest, TimelineGoesWithRecord) {
  const WrapperOptions o = split_wrapper_args({"--record", "--timeline", "/tmp/t.svg", "img"});
  EXPECT_TRUE(o.record);
  EXPECT_EQ(o.timeline, "/tmp/t.svg");
  EXPECT_EQ(o.image, "img");
  const Error e = expect_error([] { split_wrapper_args({"--timeline=/tmp/t.svg", "img"}); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "add --record");
  EXPECT_CONTAINS(error_of([] { split_wrapper_args({"--record", "--timeline="}); }), "--timeline: empty path");
}

TEST(RunArgsTest, GuardIsOursAndTakesATimeline) {
  const WrapperOptions o = split_wrapper_args({"--guard", "--shm-size", "64m", "--timeline", "/tmp/t.svg", "img"});
  EXPECT_TRUE(o.guard);
  EXPECT_FALSE(o.record);
  EXPECT_EQ(o.timeline, "/tmp/t.svg");
  EXPECT_EQ(o.engine_options, (Args{"--shm-size", "64m"}));
  EXPECT_EQ(o.image, "img");
  EXPECT_CONTAINS(error_of([] { split_wrapper_args({"--timeline=/tmp/t.svg", "img"}); }), "add --record or --guard");
}

TEST(RunArgsTest, Errors) {
  EXPECT_THROW(split_wrapper_args({"--profile"}), Error);
  EXPECT_THROW(split_wrapper_args({"--rm", "-v"}), Error);
  EXPECT_THROW(split_wrapper_args({"--rm"}), Error);  // no image
  EXPECT_THROW(split_wrapper_args({"--dry-run=yes", "img"}), Error);
  EXPECT_NO_THROW(split_wrapper_args({"--help"}));
}

TEST(RunArgsTest, ScansWhatMattersForShm) {
  EngineOptionFacts f =
      scan_engine_options({"--shm-size", "2g", "--ipc=host", "-m", "8g", "--cpus=1.5", "--cpuset-cpus", "0-3", "--rm"});
  EXPECT_EQ(f.shm_size, "2g");
  EXPECT_EQ(f.ipc, "host");
  EXPECT_EQ(f.memory, "8g");
  EXPECT_EQ(f.cpus, "1.5");
  EXPECT_EQ(f.cpuset_cpus, "0-3");
  EXPECT_FALSE(f.host_shm_mount);
  EXPECT_TRUE(scan_engine_options({"-v", "/dev/shm:/dev/shm"}).host_shm_mount);
  EXPECT_TRUE(scan_engine_options({"--volume=/dev/shm:/dev/shm:rw"}).host_shm_mount);
  EXPECT_TRUE(scan_engine_options({"--mount", "type=bind,source=/dev/shm,target=/dev/shm"}).host_shm_mount);
  EXPECT_FALSE(scan_engine_options({"--mount", "type=tmpfs,target=/dev/shm"}).host_shm_mount);
  EXPECT_FALSE(scan_engine_options({"-v", "/data:/data"}).host_shm_mount);
  EXPECT_EQ(scan_engine_options({"-itm", "4g"}).memory, "4g");
  EXPECT_EQ(scan_engine_options({"-m4g"}).memory, "4g");
  // A value that looks like an option is still the value of the option before it.
  EXPECT_FALSE(scan_engine_options({"-e", "--ipc=host"}).ipc);
}

TEST(RunArgsTest, ShellQuote) {
  EXPECT_EQ(shell_quote("plain-arg_1.0:/x=y"), "plain-arg_1.0:/x=y");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

}  // namespace
}  // namespace gpurun
