#include "engine/invocation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/decision_record.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

class WrapperTest : public ::testing::Test {
 protected:
  Config config_;
  HostInfo host_;
  EnvLookup env_ = test::builtin_only_env;

  void SetUp() override {
    host_.cpus = 2;
    host_.mem_total = 24 * kGiB;
    host_.mem_available = 20 * kGiB;
  }
  EngineInvocation run(const Args& args) { return prepare_run(split_wrapper_args(args), config_, host_, env_); }
  static bool has_pair(const Args& argv, const std::string& a, const std::string& b) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == a && argv[i + 1] == b) return true;
    return false;
  }
};

TEST_F(WrapperTest, BuildsTheEngineCommand) {
  EngineInvocation inv = run({"--profile", "imagenet", "--gpus", "2", "--rm", "-e", "X=1", "img", "df", "/dev/shm"});
  const Args& a = inv.argv;
  ASSERT_GE(a.size(), 4u);
  EXPECT_EQ(a[0], "docker");
  EXPECT_EQ(a[1], "run");
  // imagenet, 2 CPUs / 2 ranks -> 1 worker, pin_memory on a GPU -> hold 0:
  // per_rank = (2*1+0) * 38539264 + 4096*(8+5) = 77131776; NCCL's SHM segments for 2 ranks:
  // 2*2*1*(9637888+4096) = 38567936; 2*77131776 + 38567936 = 192831488 -> 184 MiB, raised to
  // imagenet's min_shm 256 MiB.
  EXPECT_TRUE(has_pair(a, "--shm-size", "256m"));
  EXPECT_TRUE(has_pair(a, "--gpus", "2"));
  EXPECT_TRUE(has_pair(a, "-e", "GPU_RUN_PROFILE=imagenet"));
  EXPECT_TRUE(has_pair(a, "-e", "GPU_RUN_NUM_WORKERS=1"));
  EXPECT_TRUE(has_pair(a, "-e", "GPU_RUN_BATCH_SIZE=64"));
  EXPECT_TRUE(has_pair(a, "-e", "GPU_RUN_SHM_SIZE=256m"));
  EXPECT_TRUE(has_pair(a, "--label", "gpu-run.profile=imagenet"));
  // The GPU count is recorded, so the node guard and doctor can read it back.
  EXPECT_TRUE(has_pair(a, "-e", "GPU_RUN_GPUS=2"));
  EXPECT_TRUE(has_pair(a, "--label", "gpu-run.gpus=2"));
  EXPECT_EQ(Args(a.end() - 5, a.end()), (Args{"-e", "X=1", "img", "df", "/dev/shm"}));
  EXPECT_TRUE(inv.warnings.empty());
}

TEST_F(WrapperTest, GpuRequestModes) {
  EngineInvocation inv = run({"--gpus", "2", "--gpu-request", "cdi", "img"});
  EXPECT_TRUE(has_pair(inv.argv, "--device", "nvidia.com/gpu=0"));
  EXPECT_TRUE(has_pair(inv.argv, "--device", "nvidia.com/gpu=1"));
  EXPECT_FALSE(has_pair(inv.argv, "--device", "nvidia.com/gpu=2"));
  inv = run({"--gpus", "device=3,5", "--gpu-request", "cdi", "img"});
  EXPECT_TRUE(has_pair(inv.argv, "--device", "nvidia.com/gpu=5"));
  inv = run({"--gpus", "2", "--gpu-request", "none", "img"});
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--gpus"), 0);
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--device"), 0);
  EXPECT_EQ(inv.plan.ranks, 2u);
  // No GPU reaches the container: the default profile's pinned loader is planned unpinned.
  EXPECT_EQ(inv.plan.hold, 3u);
  EXPECT_NE(inv.plan.hold_why.find("(--gpu-request none)"), std::string::npos);
  inv = run({"--gpus", "2", "--gpu-request", "docker", "img"});
  EXPECT_EQ(inv.plan.hold, 0u);
  inv = run({"--engine", "podman", "--gpus", "1", "img"});
  EXPECT_EQ(inv.argv[0], "podman");
  EXPECT_TRUE(has_pair(inv.argv, "--device", "nvidia.com/gpu=0"));  // podman defaults to CDI
}

TEST_F(WrapperTest, NoGpusMeansOneLoader) {
  EngineInvocation inv = run({"--profile", "cifar", "img"});
  EXPECT_EQ(inv.plan.ranks, 1u);
  EXPECT_EQ(inv.plan.nccl, 0u);
}

TEST_F(WrapperTest, ExplicitShmSizeWinsWithAWarningWhenBelowThePlan) {
  EngineInvocation inv = run({"--profile", "imagenet", "--gpus", "2", "--shm-size", "200m", "img"});
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--shm-size"), 1);
  EXPECT_TRUE(has_pair(inv.argv, "--shm-size", "200m"));  // the plan is 256m (BuildsTheEngineCommand)
  EXPECT_TRUE(has_pair(inv.argv, "-e", "GPU_RUN_SHM_SIZE=200m"));
  ASSERT_EQ(inv.warnings.size(), 1u);
  EXPECT_NE(inv.warnings[0].find("below gpu-run's plan"), std::string::npos);
  inv = run({"--profile", "mnist", "--shm-size=4g", "img"});
  EXPECT_TRUE(inv.warnings.empty());
}

TEST_F(WrapperTest, IpcHostIsNotSized) {
  EngineInvocation inv = run({"--profile", "imagenet", "--ipc=host", "img"});
  EXPECT_FALSE(inv.sized);
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--shm-size"), 0);
  ASSERT_FALSE(inv.warnings.empty());
  EXPECT_NE(inv.warnings[0].find("host's /dev/shm"), std::string::npos);
  // No size is recorded that the container did not get.
  for (const std::string& arg : inv.argv) {
    EXPECT_EQ(arg.find("GPU_RUN_SHM_SIZE"), std::string::npos) << arg;
    EXPECT_EQ(arg.find("gpu-run.shm-size"), std::string::npos) << arg;
  }
  EXPECT_TRUE(has_pair(inv.argv, "-e", "GPU_RUN_PROFILE=imagenet"));
  inv = run({"-v", "/dev/shm:/dev/shm", "img"});
  EXPECT_FALSE(inv.sized);
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--label"), 2);  // the profile and the record
  // The record says what was decided: no size, the host's /dev/shm.
  const auto label = std::find_if(inv.argv.begin(), inv.argv.end(),
                                  [](const std::string& a) { return a.rfind("gpu-run.decision=", 0) == 0; });
  ASSERT_NE(label, inv.argv.end());
  const DecisionRecord d = parse_decision(label->substr(17), "label");
  EXPECT_EQ(d.door, "gpu-run");
  EXPECT_FALSE(d.size);
}

TEST_F(WrapperTest, ExplainEndsWithWhatTheContainerGets) {
  // As the guide shows --explain and gpu-run-ctl plan: the last line is the size applied.
  EXPECT_EQ(explain_outcome(run({"--profile", "imagenet", "--gpus", "2", "img"})),
            "=> /dev/shm 256MiB (gpu-run passes --shm-size 256m)\n");
  EXPECT_EQ(explain_outcome(run({"--profile", "imagenet", "--shm-size", "1g", "img"})),
            "=> /dev/shm 1GiB (yours: --shm-size 1g)\n");
  EXPECT_EQ(explain_outcome(run({"--profile", "imagenet", "--ipc", "host", "img"})),
            "=> /dev/shm not sized by gpu-run (the warning above says why)\n");
}

TEST_F(WrapperTest, ATmpfsOntoDevShmIsTheUsersSize) {
  // The engine mounts the user's tmpfs over its own /dev/shm: the container gets 1 GiB, and so
  // says what gpu-run records; no --shm-size the engine would not use.
  for (const Args& tmpfs : {Args{"--tmpfs", "/dev/shm:size=1g"}, Args{"--tmpfs=/dev/shm:rw,size=1g,mode=1777"},
                            Args{"--mount", "type=tmpfs,destination=/dev/shm,tmpfs-size=1073741824"}}) {
    Args args = {"--profile", "imagenet", "--gpus", "2"};
    args.insert(args.end(), tmpfs.begin(), tmpfs.end());
    args.push_back("img");
    const EngineInvocation inv = run(args);
    EXPECT_TRUE(inv.sized) << tmpfs[0];
    EXPECT_EQ(inv.applied_shm, kGiB) << tmpfs[0];
    EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--shm-size"), 0) << tmpfs[0];
    EXPECT_TRUE(has_pair(inv.argv, "-e", "GPU_RUN_SHM_SIZE=1024m")) << tmpfs[0];
    EXPECT_TRUE(has_pair(inv.argv, "--label", "gpu-run.shm-size=1024m")) << tmpfs[0];
    EXPECT_TRUE(inv.warnings.empty()) << tmpfs[0];
  }
  EngineInvocation inv = run({"--profile", "imagenet", "--gpus", "2", "--tmpfs", "/dev/shm:size=64m", "img"});
  ASSERT_EQ(inv.warnings.size(), 1u);
  EXPECT_CONTAINS(inv.warnings[0], "--tmpfs /dev/shm:size=64m (64MiB) is below gpu-run's plan of 256MiB");
  EXPECT_CONTAINS(inv.warnings[0], "your tmpfs wins");
  // Without a size the kernel's default applies, which gpu-run does not size.
  inv = run({"--profile", "imagenet", "--gpus", "2", "--tmpfs", "/dev/shm", "img"});
  EXPECT_FALSE(inv.sized);
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--shm-size"), 0);
  ASSERT_EQ(inv.warnings.size(), 1u);
  EXPECT_CONTAINS(inv.warnings[0], "add size=256m");
  // Another directory's tmpfs is not /dev/shm.
  inv = run({"--profile", "imagenet", "--gpus", "2", "--tmpfs", "/dev/shmx:size=1g", "img"});
  EXPECT_TRUE(has_pair(inv.argv, "--shm-size", "256m"));
}

TEST_F(WrapperTest, ABindOfADirectoryOnDiskIsNotTheHostsDevShm) {
  for (const Args& bind :
       {Args{"-v", "/srv/scratch:/dev/shm"}, Args{"--mount", "type=bind,source=/srv/scratch,target=/dev/shm"}}) {
    Args args = {"--profile", "imagenet"};
    args.insert(args.end(), bind.begin(), bind.end());
    args.push_back("img");
    const EngineInvocation inv = run(args);
    EXPECT_FALSE(inv.sized) << bind[1];
    ASSERT_EQ(inv.warnings.size(), 1u) << bind[1];
    EXPECT_NOT_CONTAINS(inv.warnings[0], "host's /dev/shm");
    EXPECT_CONTAINS(inv.warnings[0],
                    "a bind mount of /srv/scratch onto /dev/shm: the container's /dev/shm is that "
                    "directory, on its filesystem");
  }
  EXPECT_CONTAINS(run({"-v", "/dev/shm:/dev/shm", "img"}).warnings.at(0), "uses the host's /dev/shm");
}

TEST_F(WrapperTest, RefusesAProfileWhoseNameIsNotItsFiles) {
  test::TempDir d;
  d.write("mine.json", R"({"name": "other"})");
  env_ = test::fake_env(
      {{"GPU_RUN_BUILTIN_PROFILES", GPU_RUN_SOURCE_PROFILES}, {"GPU_RUN_PROFILE_PATH", d.path().string()}});
  const Error e = expect_error([&] { run({"--profile", "mine", "img"}); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "key 'name': 'other' does not match the file's name");
}

// gpu-run's door: an unreadable profile file (a link to itself) exits 2 (docs/reference.md) with
// its errno and the errno's words.
TEST_F(WrapperTest, AnUnreadableProfileReportsItsErrnoAndExitsTwo) {
  test::TempDir d;
  fs::create_symlink("loop.json", d.path() / "loop.json");
  env_ = test::fake_env(
      {{"GPU_RUN_BUILTIN_PROFILES", GPU_RUN_SOURCE_PROFILES}, {"GPU_RUN_PROFILE_PATH", d.path().string()}});
  const Error e = expect_error([&] { run({"--profile", "loop", "img"}); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_EQ(e.errno_value(), ELOOP);
  EXPECT_CONTAINS(e.what(), (d.path() / "loop.json").string() + ": cannot open: " + std::strerror(ELOOP));
}

TEST_F(WrapperTest, MemoryBoundsThePlan) {
  try {
    run({"--profile", "imagenet", "--gpus", "2", "--memory", "384m", "img"});
    FAIL() << "plan over --memory accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    const std::string m = e.what();
    // 256 MiB (BuildsTheEngineCommand); at most 50% of --memory may be shm (192 MiB of 384m),
    // so --memory must be at least 2 * 256 = 512 MiB.
    EXPECT_NE(m.find("256MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("raise --memory to at least 512m"), std::string::npos) << m;
  }
  // 4g: 50% = 2048 MiB >= 256 MiB.
  EXPECT_NO_THROW(run({"--profile", "imagenet", "--gpus", "2", "--memory", "4g", "img"}));
}

// The contract table as the wrapper reads it: each fact under each name it accepts (its flag,
// -e/--env/--env-file under the key's env name and its alias) plans the same size.
TEST_F(WrapperTest, EveryNameOfAFactPlansTheSameSize) {
  struct Fact {
    Args flag;
    std::vector<std::string> env;  // NAME=VALUE under each accepted name
  };
  const std::vector<Fact> facts = {
      {{"--profile", "imagenet"}, {"GPU_RUN_PROFILE=imagenet"}},
      {{"--gpus", "2"}, {"GPU_RUN_GPUS=2"}},
      {{"--workers", "8"}, {"GPU_RUN_WORKERS=8", "GPU_RUN_NUM_WORKERS=8"}},
      {{"--batch-size", "128"}, {"GPU_RUN_BATCH_SIZE=128"}},
      {{"--shm-size", "3g"}, {"GPU_RUN_SHM_SIZE=3g"}},
  };
  // The other facts of the job, by flag; --gpu-request none as on a host without NVIDIA's runtime.
  const Args base = {"--gpu-request", "none", "--profile", "imagenet", "--gpus", "2"};
  auto without = [&](const Args& flag) {
    Args out;
    for (std::size_t i = 0; i < base.size(); i += 2)
      if (base[i] != flag[0]) out.insert(out.end(), {base[i], base[i + 1]});
    return out;
  };
  test::TempDir dir;
  for (const Fact& fact : facts) {
    Args by_flag = without(fact.flag);
    by_flag.insert(by_flag.end(), fact.flag.begin(), fact.flag.end());
    by_flag.push_back("img");
    const EngineInvocation want = run(by_flag);
    for (const std::string& item : fact.env) {
      const std::string name = item.substr(0, item.find('='));
      const std::string file = dir.write("env", "# a comment\n" + item + "\n").string();
      for (const Args& given : {Args{"-e", item}, Args{"--env=" + item}, Args{"--env-file", file}}) {
        Args by_env = without(fact.flag);
        by_env.insert(by_env.end(), given.begin(), given.end());
        by_env.push_back("img");
        const EngineInvocation got = run(by_env);
        EXPECT_EQ(got.applied_shm, want.applied_shm) << item << " by " << given[0];
        EXPECT_TRUE(has_pair(got.argv, "--shm-size", engine_size(want.applied_shm))) << item << " by " << given[0];
      }
      // -e NAME alone takes the value from gpu-run's environment, as the engine does.
      const std::string value = item.substr(item.find('=') + 1);
      env_ = [&](const std::string& n) -> std::optional<std::string> {
        if (n == name) return value;
        return test::builtin_only_env(n);
      };
      Args by_name = without(fact.flag);
      by_name.insert(by_name.end(), {"-e", name, "img"});
      EXPECT_EQ(run(by_name).applied_shm, want.applied_shm) << name;
      env_ = test::builtin_only_env;
    }
  }
}

// The issue's trap: -e GPU_RUN_NUM_WORKERS=8 was passed to the container and ignored by the plan
// (425m instead of --workers 8's size); now both names and the flag plan 8, and two values are
// refused in one line naming both.
TEST_F(WrapperTest, WorkersUnderEitherNameOrTheFlagAgreeOrAreRefused) {
  const Args job = {"--profile", "imagenet", "--gpus", "2", "--gpu-request", "none"};
  auto with = [&](Args extra) {
    Args a = job;
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("img");
    return run(a);
  };
  const EngineInvocation flag = with({"--workers", "8"});
  EXPECT_EQ(flag.plan.workers, 8u);
  EXPECT_EQ(with({"-e", "GPU_RUN_NUM_WORKERS=8"}).plan.workers, 8u);
  EXPECT_EQ(with({"-e", "GPU_RUN_NUM_WORKERS=8"}).applied_shm, flag.applied_shm);
  EXPECT_EQ(with({"-e", "GPU_RUN_WORKERS=8", "-e", "GPU_RUN_NUM_WORKERS=8", "--workers", "8"}).applied_shm,
            flag.applied_shm);
  auto refused = [&](Args extra) {
    try {
      with(extra);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused({"-e", "GPU_RUN_WORKERS=4", "-e", "GPU_RUN_NUM_WORKERS=8"}),
            "-e GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values: give one");
  EXPECT_EQ(refused({"--workers", "4", "-e", "GPU_RUN_NUM_WORKERS=8"}),
            "--workers 4 and -e GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values: give one");
  EXPECT_EQ(refused({"--shm-size", "1g", "-e", "GPU_RUN_SHM_SIZE=2g"}),
            "--shm-size 1g and -e GPU_RUN_SHM_SIZE=2g name one key (shm-size) with two values: give one");
  // A later -e of a name wins, as with the engine: one value, no conflict.
  EXPECT_EQ(with({"-e", "GPU_RUN_WORKERS=4", "-e", "GPU_RUN_WORKERS=8"}).plan.workers, 8u);
  EXPECT_NE(refused({"--env-file", "/nonexistent/env"}).find("--env-file /nonexistent/env: cannot read it"),
            std::string::npos);
}

TEST_F(WrapperTest, SaysLoudlyWhenTheCommandLineStartsOtherWorkersThanThePlan) {
  // imagenet on 2 GPUs and 2 CPUs: auto gives 1 worker per rank (BuildsTheEngineCommand), 256m.
  const EngineInvocation inv =
      run({"--profile", "imagenet", "--gpus", "2", "--rm", "img", "python", "train.py", "-j", "4"});
  EXPECT_EQ(inv.plan.workers, 1u);  // the plan stays gpu-run's: the line says what to do
  EXPECT_TRUE(has_pair(inv.argv, "--shm-size", "256m"));
  ASSERT_EQ(inv.warnings.size(), 1u);
  const std::string& w = inv.warnings[0];
  const std::string four = format_size(run({"--profile", "imagenet", "--gpus", "2", "--workers", "4", "img"}).plan.shm);
  for (const std::string& part :
       std::vector<std::string>{"'-j 4'", "1 DataLoader worker per GPU rank (auto", "256MiB", four + ":",
                                "pass --workers 4 to gpu-run", "make the script read GPU_RUN_WORKERS"})
    EXPECT_NE(w.find(part), std::string::npos) << part << " not in: " << w;
  // gpu-run's own --workers that the script contradicts is as wrong.
  const EngineInvocation told =
      run({"--profile", "imagenet", "--gpus", "2", "--workers", "2", "img", "python", "t.py", "--workers=4"});
  ASSERT_EQ(told.warnings.size(), 1u);
  EXPECT_NE(told.warnings[0].find("2 DataLoader workers per GPU rank (--workers)"), std::string::npos)
      << told.warnings[0];
  // One rank on 2 CPUs, one CPU for 2 ranks: each word singular only for one.
  const EngineInvocation one = run({"--profile", "imagenet", "--gpus", "1", "img", "python", "t.py", "-j", "7"});
  ASSERT_EQ(one.warnings.size(), 1u);
  EXPECT_CONTAINS(one.warnings[0], "(auto: 2 CPUs / 1 rank)");
  host_.cpus = 1;
  const EngineInvocation cpu = run({"--profile", "imagenet", "--gpus", "2", "img", "python", "t.py", "-j", "7"});
  ASSERT_EQ(cpu.warnings.size(), 1u);
  EXPECT_CONTAINS(cpu.warnings[0], "(auto: 1 CPU / 2 ranks)");
  host_.cpus = 2;
  // The same count, or no worker flag: nothing to say.
  EXPECT_TRUE(run({"--profile", "imagenet", "--gpus", "2", "img", "python", "t.py", "-j", "1"}).warnings.empty());
  EXPECT_TRUE(run({"--profile", "imagenet", "--gpus", "2", "--workers", "4", "img", "python", "t.py", "-j", "4"})
                  .warnings.empty());
  EXPECT_TRUE(run({"--profile", "imagenet", "--gpus", "2", "img", "python", "t.py"}).warnings.empty());
}

TEST_F(WrapperTest, ZeroGpusIsNoGpuRequest) {
  // Docker's `--gpus 0` fails (could not select device driver ""): 0 GPUs means no request.
  for (const std::string& mode : Args{"docker", "cdi"}) {
    const Args a = run({"--gpu-request", mode, "--profile", "mnist", "--gpus", "0", "img", "true"}).argv;
    EXPECT_EQ(std::find(a.begin(), a.end(), "--gpus"), a.end()) << mode;
    EXPECT_EQ(std::find(a.begin(), a.end(), "--device"), a.end()) << mode;
  }
  EXPECT_TRUE(has_pair(run({"--gpu-request", "docker", "--gpus", "1", "img"}).argv, "--gpus", "1"));
}

TEST_F(WrapperTest, CpusOptionsBoundAutoWorkers) {
  host_.cpus = 32;
  EXPECT_EQ(run({"--profile", "imagenet", "--cpus", "3.5", "img"}).plan.workers, 4u);
  EXPECT_EQ(run({"--profile", "imagenet", "--cpuset-cpus", "0-2", "img"}).plan.workers, 3u);
  EXPECT_EQ(run({"--profile", "imagenet", "img"}).plan.workers, 12u);
}

TEST_F(WrapperTest, BadInputs) {
  const std::vector<Args> bad = {
      {"--profile", "imagenett", "img"},  {"--gpus", "0x", "img"},      {"--workers", "-3", "img"},
      {"--batch-size", "0", "img"},       {"--memory", "2x", "img"},    {"--memory", "-1g", "img"},
      {"--shm-size", "99999999t", "img"}, {"--profile", "../x", "img"}, {"--engine", "lxc", "img"},
      {"--gpu-request", "magic", "img"},  {"--cpus", "abc", "img"},     {"--gpus", "all", "img"},
  };
  for (const Args& args : bad) {
    try {
      run(args);
      ADD_FAILURE() << "accepted " << args[0] << " " << args[1];
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

// An explicit --shm-size over the memory budget: the same answer as the runtime's and the
// webhook's (core's decide_shm), not a warning.
TEST_F(WrapperTest, AnExplicitSizeOverTheBudgetIsRefused) {
  const Error e = expect_error([&] { run({"--memory", "1g", "--shm-size", "600m", "img"}); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--shm-size 600MiB does not fit the memory limit 1GiB");
  EXPECT_CONTAINS(e.what(), "raise --memory to at least 1200m or ask for less");
  // Within the budget it is applied as given, below the plan with a warning.
  EngineInvocation inv = run({"--profile", "imagenet", "--memory", "1g", "--shm-size", "100m", "img"});
  EXPECT_TRUE(inv.sized);
  EXPECT_EQ(inv.applied_shm, 100 * kMiB);
  ASSERT_FALSE(inv.warnings.empty());
  EXPECT_CONTAINS(inv.warnings[0], "is below gpu-run's plan");
  // A person who knows better keeps it, and it is recorded as their choice.
  inv = run({"--memory", "1g", "--shm-size", "600m", "--over-budget", "img"});
  EXPECT_TRUE(inv.sized);
  EXPECT_EQ(inv.applied_shm, 600 * kMiB);
  EXPECT_TRUE(has_pair(inv.argv, "--label", "gpu-run.over-budget=chosen"));
  EXPECT_TRUE(has_pair(inv.argv, "--label", "gpu-run.shm-size=600m"));
  ASSERT_EQ(inv.warnings.size(), 1u);
  EXPECT_CONTAINS(inv.warnings[0], "--shm-size 600m (600MiB) does not fit the memory limit 1GiB");
  EXPECT_CONTAINS(inv.warnings[0], "kept, as --over-budget says you chose it");
  EXPECT_EQ(std::count(inv.argv.begin(), inv.argv.end(), "--over-budget"), 0) << "gpu-run's own flag";
  // Within the budget it changes nothing; without a size it has nothing to keep.
  inv = run({"--memory", "1g", "--shm-size", "100m", "--over-budget", "img"});
  EXPECT_FALSE(has_pair(inv.argv, "--label", "gpu-run.over-budget=chosen"));
  const Error none = expect_error([&] { run({"--memory", "1g", "--over-budget", "img"}); });
  EXPECT_EQ(none.exit_code(), kExitUsage);
  EXPECT_CONTAINS(none.what(), "--over-budget: keeps a size you chose over the memory budget");
  // An absurd size is refused too, --over-budget or not.
  EXPECT_CONTAINS(expect_error([&] {
                    run({"--shm-size", "1t", "--over-budget", "img"});
                  }).what(),
                  "is more than this host's memory");
  EXPECT_CONTAINS(expect_error([&] { run({"--shm-size", "1t", "img"}); }).what(), "is more than this host's memory");
}

}  // namespace
}  // namespace gpurun
