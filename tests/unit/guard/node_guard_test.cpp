#include "guard/node_guard.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "decision/decision_record.hpp"
#include "decision/growth_limits.hpp"
#include "guard/container_admission.hpp"
#include "guard/discovery.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

ContainerInfo running(std::map<std::string, std::string> labels, std::map<std::string, std::string> env = {}) {
  ContainerInfo c;
  c.engine = "docker";
  c.id = "0123456789abcdef0123";
  c.name = "job";
  c.running = true;
  c.pid = 42;
  c.ipc = parse_ipc_mode("private");
  c.labels = std::move(labels);
  c.env = std::move(env);
  return c;
}

// 1 MiB a sample, max_shm 4 GiB: a batch of 8 is 8 MiB.
Profile small_profile(const std::string& name) {
  Profile p;
  p.name = name;
  p.sample_bytes = kMiB;
  p.batch_size = 8;
  p.workers_per_gpu = 2;
  p.prefetch_factor = 2;
  p.max_shm = 4 * kGiB;
  return p;
}

TEST(NodeGuardTest, ListsEveryContainerTheAdmissionChoosesFrom) {
  EXPECT_EQ(guard_ps_commands("podman"), (std::vector<std::vector<std::string>>{{"podman", "ps", "-q", "--no-trunc"}}));
}

// Why the guard passes `c` over; "" when it takes it.
std::string guard_skip_reason(const ContainerInfo& c, bool all) {
  const OrWhy<ContainerInfo> taken = guardable(c, all);
  if (taken) {
    EXPECT_EQ(taken->id, c.id);
  }
  return taken ? "" : taken.why;
}

TEST(NodeGuardTest, GuardsLabelledContainersOrAnyWithAll) {
  EXPECT_EQ(guard_skip_reason(running({{"gpu-run.profile", "imagenet"}}), false), "");
  EXPECT_EQ(guard_skip_reason(running({{"gpu-run.shm-size", "64m"}}), false), "");
  const ContainerInfo plain = running({{"other", "x"}});
  EXPECT_CONTAINS(guard_skip_reason(plain, false), "--all");
  EXPECT_EQ(guard_skip_reason(plain, true), "");
}

TEST(NodeGuardTest, SkipsContainersWithoutAShmOfTheirOwnOrNotRunning) {
  for (const char* ipc : {"host", "none", "container:abc"}) {
    ContainerInfo c = running({{"gpu-run.profile", "imagenet"}});
    c.ipc = parse_ipc_mode(ipc);
    EXPECT_CONTAINS(guard_skip_reason(c, true), "no /dev/shm of its own") << ipc;
  }
  ContainerInfo shareable = running({}, {});
  shareable.ipc = parse_ipc_mode("shareable");
  EXPECT_EQ(guard_skip_reason(shareable, true), "");
  ContainerInfo stopped = running({{"gpu-run.profile", "imagenet"}});
  stopped.running = false;
  EXPECT_EQ(guard_skip_reason(stopped, true), "not running");
}

TEST(NodeGuardTest, PlanInputsNeedProfileWorkersAndBatchSize) {
  const auto in = guard_plan_inputs(
      running({{"gpu-run.profile", "imagenet"}}, {{"GPU_RUN_NUM_WORKERS", "2"}, {"GPU_RUN_BATCH_SIZE", "96"}}));
  ASSERT_TRUE(in);
  EXPECT_EQ(in->profile, "imagenet");
  EXPECT_EQ(in->workers, 2u);
  EXPECT_EQ(in->batch_size, 96u);
  // The environment's profile wins over the label.
  EXPECT_EQ(
      guard_plan_inputs(running({{"gpu-run.profile", "a"}},
                                {{"GPU_RUN_PROFILE", "b"}, {"GPU_RUN_NUM_WORKERS", "2"}, {"GPU_RUN_BATCH_SIZE", "8"}}))
          ->profile,
      "b");
  EXPECT_FALSE(guard_plan_inputs(running({{"gpu-run.profile", "a"}}, {{"GPU_RUN_NUM_WORKERS", "2"}})));
  EXPECT_FALSE(guard_plan_inputs(running({{"gpu-run.shm-size", "64m"}})));
  EXPECT_FALSE(guard_plan_inputs(
      running({{"gpu-run.profile", "a"}}, {{"GPU_RUN_NUM_WORKERS", "x"}, {"GPU_RUN_BATCH_SIZE", "8"}})));
  EXPECT_FALSE(guard_plan_inputs(
      running({{"gpu-run.profile", "a"}}, {{"GPU_RUN_NUM_WORKERS", "0"}, {"GPU_RUN_BATCH_SIZE", "8"}})));
}

TEST(NodeGuardTest, TheStartLineReadsAsASentence) {
  EXPECT_EQ(guard_start_line("docker", false), "guarding the docker containers gpu-run sized");
  EXPECT_EQ(guard_start_line("podman", true), "guarding every running podman container");
}

TEST(NodeGuardTest, OnlyAContainerThatIsGoneLosesItsDecisionRecord) {
  EXPECT_TRUE(removes_decision_record(StopReason::kExited));
  EXPECT_TRUE(removes_decision_record(StopReason::kShmGone));
  // A restart wrote its new record first; a stopping guard leaves them for the next one.
  EXPECT_FALSE(removes_decision_record(StopReason::kStartedAgain));
  EXPECT_FALSE(removes_decision_record(StopReason::kGuardStopped));
}

TEST(NodeGuardTest, EachStopReasonKeepsItsLogWords) {
  EXPECT_STREQ(stop_reason_text(StopReason::kExited), "exited");
  EXPECT_STREQ(stop_reason_text(StopReason::kShmGone), "its /dev/shm is gone");
  EXPECT_STREQ(stop_reason_text(StopReason::kStartedAgain), "started again");
  EXPECT_STREQ(stop_reason_text(StopReason::kGuardStopped), "guard stopped");
}

// The options are checked when the guard is made, before it takes the host's lock or starts a thread.
TEST(NodeGuardTest, BadOptionsAreUsageErrorsBeforeAnythingStarts) {
  Config config;
  config.engine = "podman";
  const auto usage_error_of = [&](GuardOptions o) -> std::string {
    try {
      NodeGuard guard(std::move(o), config, GuardClock::system());
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
      return e.what();
    }
    return "";
  };
  GuardOptions zero;
  zero.interval_ms = "0";
  EXPECT_CONTAINS(usage_error_of(zero), "--interval 0");
  GuardOptions public_alone;
  public_alone.metrics_public = true;
  EXPECT_CONTAINS(usage_error_of(public_alone), "--metrics-public: give --metrics ADDR too");
  GuardOptions cri;
  cri.engine = "cri-o";
  EXPECT_CONTAINS(usage_error_of(cri), "--engine 'cri-o': expected docker, podman or containerd");

  GuardOptions fine;
  fine.interval_ms = "25";
  const NodeGuard guard(fine, config, GuardClock::system());
  EXPECT_EQ(guard.engine(), "podman");  // the config's, when --engine is not given
  EXPECT_EQ(guard.interval(), std::chrono::milliseconds(25));
}

TEST(NodeGuardTest, APlannedContainerKeepsOneBatchPerWorkerFree) {
  ContainerInfo c =
      running({{"gpu-run.profile", "small"}}, {{"GPU_RUN_NUM_WORKERS", "3"}, {"GPU_RUN_BATCH_SIZE", "4"}});
  c.memory_limit = 2 * kGiB;
  std::string asked, note;
  const GuardLimits l = container_guard_limits(
      c, Config{},
      [&](const std::string& name) {
        asked = name;
        return small_profile(name);
      },
      &note);
  EXPECT_EQ(asked, "small");
  EXPECT_EQ(l.headroom, 3 * 4 * kMiB);  // 3 workers x a batch of 4 x 1 MiB
  EXPECT_EQ(l.max_shm, 4 * kGiB);
  ASSERT_TRUE(l.budget_bytes);
  EXPECT_EQ(*l.budget_bytes, kGiB);  // memory_fraction_max 0.5 of 2 GiB
  EXPECT_CONTAINS(note, "keeps 12MiB free (profile small, 3 workers x a batch of 4)");
  // The plan's need: (prefetch 2 x 3 workers + 3 held: no GPU, no pin thread, no persistent workers) x 4 MiB,
  // and 8 + 5 x 3 semaphore pages.
  EXPECT_EQ(l.bound, round_up(36 * kMiB + 23 * 4096, 64 * 1024));  // the need, to 64 KiB
  EXPECT_CONTAINS(note, "a batch of 4), one batch near the plan's 36.1MiB");
}

TEST(NodeGuardTest, GpusFromTheEnvironmentOrTheLabelMakeRanks) {
  const std::map<std::string, std::string> env = {{"GPU_RUN_NUM_WORKERS", "3"}, {"GPU_RUN_BATCH_SIZE", "4"}};
  EXPECT_EQ(guard_plan_inputs(running({{"gpu-run.profile", "small"}}, env))->gpus, 0u);
  auto with = env;
  with["GPU_RUN_GPUS"] = "2";
  ContainerInfo c = running({{"gpu-run.profile", "small"}, {"gpu-run.gpus", "8"}}, with);
  EXPECT_EQ(guard_plan_inputs(c)->gpus, 2u);  // the environment wins over the label
  EXPECT_EQ(guard_plan_inputs(running({{"gpu-run.profile", "small"}, {"gpu-run.gpus", "8"}}, env))->gpus, 8u);
  std::string note;
  const GuardLimits l = container_guard_limits(
      c, Config{}, [](const std::string& name) { return small_profile(name); }, &note);
  EXPECT_EQ(l.headroom, 2 * 3 * 4 * kMiB);  // 2 ranks x 3 workers x a batch of 4 x 1 MiB
  EXPECT_CONTAINS(note, "keeps 24MiB free (profile small, 2 GPUs x 3 workers x a batch of 4)");
  with["GPU_RUN_GPUS"] = "two";
  EXPECT_FALSE(guard_plan_inputs(running({{"gpu-run.profile", "small"}}, with)));
  with["GPU_RUN_GPUS"] = "5000";
  EXPECT_FALSE(guard_plan_inputs(running({{"gpu-run.profile", "small"}}, with)));
}

TEST(NodeGuardTest, WithoutAPlanTheFractionAndTheBudget) {
  ContainerInfo c = running({{"gpu-run.shm-size", "64m"}});
  c.memory_limit = kGiB;
  std::string note;
  bool loaded = false;
  const auto load = [&](const std::string& name) {
    loaded = true;
    return small_profile(name);
  };
  GuardLimits l = container_guard_limits(c, Config{}, load, &note);
  EXPECT_FALSE(loaded);
  EXPECT_EQ(l.headroom, 0u);
  EXPECT_EQ(l.max_shm, 0u);
  ASSERT_TRUE(l.budget_bytes);
  EXPECT_EQ(*l.budget_bytes, kGiB / 2);
  EXPECT_CONTAINS(note, "keeps 25% free (no profile, workers and batch size in its environment)");

  // A profile that cannot be loaded falls back too, and says why.
  ContainerInfo unknown =
      running({{"gpu-run.profile", "gone"}}, {{"GPU_RUN_NUM_WORKERS", "2"}, {"GPU_RUN_BATCH_SIZE", "8"}});
  l = container_guard_limits(
      unknown, Config{}, [](const std::string&) -> Profile { throw Error("profile 'gone' not found"); }, &note);
  EXPECT_EQ(l.headroom, 0u);
  EXPECT_FALSE(l.budget_bytes);
  EXPECT_CONTAINS(note, "profile 'gone' not found");

  // GPU_RUN_PROFILE=nosuch alone: the unknown name is said, not hidden behind "no profile".
  const auto unknown_profile = [](const std::string& name) -> Profile {
    throw Error("unknown profile '" + name + "' (see 'gpu-run-ctl profiles list'; searched 3 directories)");
  };
  l = container_guard_limits(running({}, {{"GPU_RUN_PROFILE", "nosuch"}}), Config{}, unknown_profile, &note);
  EXPECT_EQ(l.headroom, 0u);
  EXPECT_CONTAINS(note, "keeps 25% free (its profile cannot be used: unknown profile 'nosuch'");
  EXPECT_EQ(note.find("no profile"), std::string::npos) << note;
  // A known profile without workers and batch size says what is missing.
  l = container_guard_limits(
      running({}, {{"GPU_RUN_PROFILE", "small"}}), Config{}, [](const std::string& n) { return small_profile(n); },
      &note);
  EXPECT_CONTAINS(note, "keeps 25% free (profile small, but no GPU_RUN_NUM_WORKERS and GPU_RUN_BATCH_SIZE");
}

// Issue 40: on a 24 GiB host the guard's line said "grows up to 256GiB" (the default profile's
// max_shm, recorded as the ceiling by a door that knew no host memory): never above the host's.
TEST(NodeGuardTest, TheCeilingIsNeverAboveTheHostsMemory) {
  ContainerInfo c = running({{"gpu-run.decision", R"({"version":1,"door":"gpu-run","size":134217728,"need":100000000,)"
                                                  R"("ceiling":274877906944,"headroom":0,"profile":"default"})"}});
  AdmissionContext ctx;
  ctx.load_profile = [](const std::string& n) {
    Profile p = small_profile(n);
    p.max_shm = 256 * kGiB;
    return p;
  };
  ctx.host_memory = 24 * kGiB;
  std::string note;
  const GuardLimits l = container_guard_limits(c, read_recorded(c, {}), ctx, &note);
  EXPECT_EQ(growth_ceiling(l, 0), 24 * kGiB);
  EXPECT_CONTAINS(note, "grows up to 24GiB");
  EXPECT_EQ(note.find("256GiB"), std::string::npos) << note;
  // Without a record either: the host's memory bounds what it grows to.
  const GuardLimits plain = container_guard_limits(
      running({{"gpu-run.shm-size", "64m"}}), read_recorded(running({{"gpu-run.shm-size", "64m"}}), {}), ctx, nullptr);
  EXPECT_EQ(growth_ceiling(plain, 0), 24 * kGiB);
}

}  // namespace
}  // namespace gpurun
