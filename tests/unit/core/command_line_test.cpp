#include "decision/command_line.hpp"

#include <gtest/gtest.h>

#include "base/units.hpp"
#include "decision/contract.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

TEST(CommandLineTest, FindsTheWorkerCountACommandLineGives) {
  using W = std::optional<CommandWorkers>;
  auto seen = [](const Args& command) { return command_worker_flag(command); };
  EXPECT_EQ(seen({"python", "train.py", "-j", "4"}), (W{{"-j 4", 4}}));
  EXPECT_EQ(seen({"python", "train.py", "-j8"}), (W{{"-j8", 8}}));
  EXPECT_EQ(seen({"python", "train.py", "--workers", "6", "--lr", "0.1"}), (W{{"--workers 6", 6}}));
  EXPECT_EQ(seen({"python", "train.py", "--workers=3"}), (W{{"--workers=3", 3}}));
  EXPECT_EQ(seen({"python", "train.py", "--num-workers", "2"}), (W{{"--num-workers 2", 2}}));
  EXPECT_EQ(seen({"python", "train.py", "--num_workers=0"}), (W{{"--num_workers=0", 0}}));
  EXPECT_EQ(seen({"python", "t.py", "--dataloader_num_workers", "5"}), (W{{"--dataloader_num_workers 5", 5}}));
  // A shell's one-string command is read word by word; the last flag wins, as argparse has it.
  EXPECT_EQ(seen({"sh", "-c", "python train.py -j 2 --workers 7"}), (W{{"--workers 7", 7}}));
  // ...with the shell's punctuation around a word.
  EXPECT_EQ(seen({"sh", "-c", "cd /w && python train.py -j 8; echo done"}), (W{{"-j 8", 8}}));
  EXPECT_EQ(seen({"bash", "-c", "(python t.py --workers=3)"}), (W{{"--workers=3", 3}}));
  // Nothing that is not a count: no flag, a value that is not a number, a flag at the end.
  EXPECT_EQ(seen({"python", "train.py"}), W{});
  EXPECT_EQ(seen({"python", "train.py", "--workers", "auto"}), W{});
  EXPECT_EQ(seen({"python", "train.py", "-j"}), W{});
  EXPECT_EQ(seen({"make", "--jobs", "4"}), W{});
  EXPECT_EQ(seen({}), W{});
}

class CommandWorkersTest : public ::testing::Test {
 protected:
  ProfileStore store_{{GPU_RUN_SOURCE_PROFILES}};
  Config config_;
  HostFacts host_{2, 0, 24 * kGiB};

  ShmDecision decide(Args args, std::map<std::string, std::string> env) {
    SpecFacts spec;
    spec.env = std::move(env);
    spec.args = std::move(args);
    spec.has_ipc_namespace = true;
    return decide_shm(container_request({}, spec), spec, config_, store_, host_);
  }
};

// The trap: `sh -c "python train.py -j 8"` on a plan for 1 worker (2 CPUs, no limit),
// said by core in the container's words, with the size 8 workers need.
TEST_F(CommandWorkersTest, AShellCommandLineOfOtherWorkersIsNamedWithBothSizes) {
  const ShmDecision d = decide({"sh", "-c", "python train.py -j 8"}, {{"GPU_RUN_PROFILE", "imagenet"}});
  ASSERT_TRUE(d.act) << (d.error ? d.error->what() : "");
  ASSERT_FALSE(d.command_warning.empty());
  EXPECT_NE(d.command_warning.find("the command line's '-j 8' asks for 8 DataLoader workers"), std::string::npos)
      << d.command_warning;
  EXPECT_NE(d.command_warning.find("planned for " + std::to_string(d.workers) + " DataLoader worker"),
            std::string::npos);
  EXPECT_NE(d.command_warning.find("8 need "), std::string::npos) << d.command_warning;
  EXPECT_NE(d.command_warning.find("set GPU_RUN_WORKERS=8, or make the script read GPU_RUN_WORKERS"), std::string::npos)
      << d.command_warning;
  EXPECT_EQ(d.command_flag, "-j 8");
  EXPECT_EQ(d.command_workers, 8u);
}

TEST_F(CommandWorkersTest, AgreeingOrAbsentWorkersSayNothing) {
  const ShmDecision agree =
      decide({"python", "train.py", "--workers", "4"}, {{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_WORKERS", "4"}});
  EXPECT_TRUE(agree.command_warning.empty()) << agree.command_warning;
  EXPECT_EQ(agree.command_workers, 4u);
  const ShmDecision none = decide({"python", "train.py"}, {{"GPU_RUN_PROFILE", "imagenet"}});
  EXPECT_TRUE(none.command_warning.empty());
  EXPECT_TRUE(none.command_flag.empty());
  // An explicit size is the person's: no plan to disagree with.
  const ShmDecision sized = decide({"python", "train.py", "-j", "8"}, {{"GPU_RUN_SHM_SIZE", "1g"}});
  EXPECT_TRUE(sized.command_warning.empty());
}

}  // namespace
}  // namespace gpurun
