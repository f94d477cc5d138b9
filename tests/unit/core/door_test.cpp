// The doors' shared steps without root or daemons: the plan for one container and the
// disposition policy, with a counting host probe.
#include "door/door.hpp"

#include <gtest/gtest.h>

#include "base/units.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

class DoorTest : public ::testing::Test {
 protected:
  ProfileStore store_{{GPU_RUN_SOURCE_PROFILES}};
  Config config_;
  int host_probes_ = 0;

  std::function<HostFacts()> host() {
    return [this] {
      ++host_probes_;
      return HostFacts{8, 0, 64 * kGiB};
    };
  }
  static SpecFacts spec(std::map<std::string, std::string> env, bool ipc = true) {
    SpecFacts s;
    s.env = std::move(env);
    s.has_ipc_namespace = ipc;
    return s;
  }
  ContainerPlan plan(const SpecFacts& s, std::map<std::string, std::string> state_annotations = {}) {
    return plan_container(state_annotations, s, config_, store_, host());
  }
};

TEST_F(DoorTest, NothingAskedIsLeftAtDebugWithoutProbingTheHost) {
  const ContainerPlan p = plan(spec({{"PATH", "/bin"}}));
  EXPECT_EQ(p.disposition.action, Action::kLeave);
  EXPECT_EQ(p.disposition.level, LogLevel::kDebug);
  EXPECT_EQ(host_probes_, 0);
}

TEST_F(DoorTest, HostIpcIsLeftAtInfoWhateverWasAsked) {
  for (const auto& env : {std::map<std::string, std::string>{{"GPU_RUN_SHM_SIZE", "1g"}},
                          std::map<std::string, std::string>{{"GPU_RUN_PROFILE", "no-such-profile"}}}) {
    const ContainerPlan p = plan(spec(env, /*ipc=*/false));
    EXPECT_TRUE(p.decision.host_ipc);
    EXPECT_EQ(p.disposition.action, Action::kLeave);
    EXPECT_EQ(p.disposition.level, LogLevel::kInfo);
    EXPECT_CONTAINS(p.disposition.fields, "action=leave reason=\"no ipc namespace");
  }
  EXPECT_EQ(host_probes_, 0);
}

TEST_F(DoorTest, ARequestIsPlannedWithTheHostProbedOnce) {
  const ContainerPlan p = plan(spec({{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_GPUS", "2"}}));
  ASSERT_EQ(p.disposition.action, Action::kAct) << p.disposition.fields;
  EXPECT_EQ(p.disposition.level, LogLevel::kInfo);
  EXPECT_EQ(p.decision.profile, "imagenet");
  EXPECT_GT(p.decision.size, 64 * kMiB);
  EXPECT_EQ(host_probes_, 1);
}

TEST_F(DoorTest, AnExplicitRequestThatCannotBeMetFails) {
  const ContainerPlan p = plan(spec({{"GPU_RUN_PROFILE", "no-such-profile"}}));
  EXPECT_EQ(p.disposition.action, Action::kFail);
  EXPECT_EQ(p.disposition.level, LogLevel::kError);
  EXPECT_CONTAINS(p.disposition.error, "no-such-profile");
  EXPECT_CONTAINS(p.disposition.fields, "action=fail source=env");
}

TEST_F(DoorTest, AProfileNamedOtherThanItsFileFailsTheContainerThatAskedForIt) {
  test::TempDir d;
  d.write("mine.json", R"({"name": "other"})");
  store_ = ProfileStore({d.path(), fs::path(GPU_RUN_SOURCE_PROFILES)});
  const ContainerPlan p = plan(spec({{"GPU_RUN_PROFILE", "mine"}}));
  EXPECT_EQ(p.disposition.action, Action::kFail);
  EXPECT_CONTAINS(p.disposition.error, "key 'name': 'other' does not match the file's name");
}

TEST_F(DoorTest, TheHostDefaultThatCannotBeMetIsSkippedUnlessOnErrorFails) {
  config_.default_profile = "no-such-profile";
  ContainerPlan p = plan(spec({}));
  EXPECT_EQ(p.disposition.action, Action::kSkip);
  EXPECT_EQ(p.disposition.level, LogLevel::kWarn);
  EXPECT_TRUE(p.disposition.error.empty());
  EXPECT_CONTAINS(p.disposition.fields, "action=skip source=default");
  config_.on_error = OnError::kFail;
  p = plan(spec({}));
  EXPECT_EQ(p.disposition.action, Action::kFail);
}

TEST_F(DoorTest, FailuresAfterTheDecisionFollowTheSamePolicy) {
  EXPECT_EQ(dispose_failure("remount refused", /*explicit_request=*/true, config_).action, Action::kFail);
  const Disposition skip = dispose_failure("remount refused", false, config_);
  EXPECT_EQ(skip.action, Action::kSkip);
  EXPECT_EQ(skip.fields, "action=skip error=\"remount refused\"");
  config_.on_error = OnError::kFail;
  const Disposition fail = dispose_failure("remount refused", false, config_);
  EXPECT_EQ(fail.action, Action::kFail);
  EXPECT_EQ(fail.error, "remount refused");
}

TEST_F(DoorTest, TheStateAnnotationsOfTheHookWinOverTheSpec) {
  SpecFacts s = spec({{"GPU_RUN_SHM_SIZE", "1g"}});
  const ContainerPlan p = plan(s, {{"gpu-run.shm-size", "2g"}});
  ASSERT_EQ(p.disposition.action, Action::kAct);
  EXPECT_EQ(p.decision.size, 2 * kGiB);
  EXPECT_EQ(p.decision.source, "annotation");  // the env value of the same key is shadowed, not a source
}

TEST_F(DoorTest, ThePodLimitIsProbedOnlyForAPodsContainerWithoutItsOwnLimit) {
  // Paths that exist on no host: a probe that ran would find nothing either, so these check
  // the guards; tests/unit/core/host_test.cpp checks the read itself.
  SpecFacts s = spec({});
  s.cgroups_path = "/gpu-run-no-such/pod/abc";
  EXPECT_FALSE(probe_pod_memory_limit(s).has_value());
  s.annotations["io.kubernetes.cri.container-type"] = "sandbox";
  EXPECT_FALSE(probe_pod_memory_limit(s).has_value());
  s.memory_limit = kGiB;
  EXPECT_FALSE(probe_pod_memory_limit(s).has_value());
}

TEST(ResultFieldsTest, OneFormatForWhatADoorDid) {
  ShmDecision d;
  d.act = true;
  d.size = 256 * kMiB;
  const std::string resized = result_fields(d, ShmResult{ShmOutcome::kResized, 64 * kMiB, 256 * kMiB});
  EXPECT_EQ(resized.rfind("action=resized ", 0), 0u) << resized;
  EXPECT_NE(resized.find(describe(d)), std::string::npos) << resized;
  EXPECT_NE(resized.find(" before=64m after=256m"), std::string::npos) << resized;
  EXPECT_EQ(resized.find("reason="), std::string::npos) << resized;
  // podman's default /dev/shm is 65536000 bytes: in MiB as every size of the line, not "65536000b".
  EXPECT_CONTAINS(result_fields(d, ShmResult{ShmOutcome::kResized, 65536000, 256 * kMiB}), " before=62.5m after=256m");
  const std::string host = result_fields(d, ShmResult{ShmOutcome::kHostShm, 64 * kMiB, 64 * kMiB});
  EXPECT_NE(host.find("reason=\"the host's /dev/shm is never resized\""), std::string::npos) << host;
}

}  // namespace
}  // namespace gpurun
