// The doors' shared steps without root or daemons: the container contract, the plan for one
// container, the disposition policy, and gpu-run-runtime's spec edit over an in-memory spec.
#include "door.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "contract.hpp"
#include "runtime.hpp"
#include "test_util.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

TEST(Contract, HooksDPatternIsDerivedFromTheRequestKeys) {
  const std::regex ere(request_annotation_pattern(), std::regex::extended);
  for (const RequestKeySpec& k : kRequestKeys) EXPECT_TRUE(std::regex_match(k.annotation, ere)) << k.annotation;
  EXPECT_EQ(kRequestKeys.size(), 5u);
  for (const char* other :
       {"gpu-run.", "gpu-runXprofile", "gpu-run.profiles", kCrioShmSizeAnnotation, kLabelShmSize + 1})
    EXPECT_FALSE(std::regex_match(other, ere)) << other;
}

TEST(Contract, EveryRequestKeyReachesTheRequestByAnnotationAndByEnv) {
  for (const RequestKeySpec& k : kRequestKeys) {
    SpecFacts by_env;
    by_env.env[k.env] = "7";
    SpecFacts by_annotation;
    by_annotation.annotations[k.annotation] = "7";
    for (const SpecFacts& spec : {by_env, by_annotation}) {
      const ContainerRequest r = container_request({}, spec);
      EXPECT_TRUE(r.named_anything()) << k.name;
      const std::optional<std::string>* fields[] = {&r.profile, &r.gpus, &r.workers, &r.batch_size, &r.shm_size};
      EXPECT_EQ(*fields[static_cast<int>(k.key)], "7") << k.name;
    }
    EXPECT_TRUE(has_request_annotation({{k.annotation, ""}})) << k.name;
  }
  EXPECT_FALSE(has_request_annotation({{kCrioShmSizeAnnotation, "1g"}, {"gpu-run.other", "x"}}));
}

TEST(Contract, EnvAndLabelsOfASizedContainer) {
  const NameValues env = container_env("imagenet", 4, 64, 1536 * kMiB);
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"GPU_RUN_PROFILE", "imagenet"}));
  EXPECT_EQ(env[1], (std::pair<std::string, std::string>{"GPU_RUN_NUM_WORKERS", "4"}));
  EXPECT_EQ(env[2], (std::pair<std::string, std::string>{"GPU_RUN_BATCH_SIZE", "64"}));
  EXPECT_EQ(env[3], (std::pair<std::string, std::string>{"GPU_RUN_SHM_SIZE", "1536m"}));
  const NameValues labels = container_labels("imagenet", 1536 * kMiB);
  EXPECT_EQ(labels, (NameValues{{"gpu-run.profile", "imagenet"}, {"gpu-run.shm-size", "1536m"}}));
  const auto names = contract_env_names();
  for (const char* n :
       {"GPU_RUN_PROFILE", "GPU_RUN_GPUS", "GPU_RUN_WORKERS", "GPU_RUN_NUM_WORKERS", "GPU_RUN_SHM_SIZE"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

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

TEST_F(DoorTest, TheHostDefaultThatCannotBeMetIsSkippedUnlessOnErrorFails) {
  config_.default_profile = "no-such-profile";
  ContainerPlan p = plan(spec({}));
  EXPECT_EQ(p.disposition.action, Action::kSkip);
  EXPECT_EQ(p.disposition.level, LogLevel::kWarn);
  EXPECT_TRUE(p.disposition.error.empty());
  EXPECT_CONTAINS(p.disposition.fields, "action=skip source=default");
  config_.on_error = "fail";
  p = plan(spec({}));
  EXPECT_EQ(p.disposition.action, Action::kFail);
}

TEST_F(DoorTest, FailuresAfterTheDecisionFollowTheSamePolicy) {
  EXPECT_EQ(dispose_failure("remount refused", /*explicit_request=*/true, config_).action, Action::kFail);
  const Disposition skip = dispose_failure("remount refused", false, config_);
  EXPECT_EQ(skip.action, Action::kSkip);
  EXPECT_EQ(skip.fields, "action=skip error=\"remount refused\"");
  config_.on_error = "fail";
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

// gpu-run-runtime's edit of an in-memory spec.
class SpecEditTest : public ::testing::Test {
 protected:
  static nlohmann::json spec_with(const nlohmann::json& shm_mount) {
    nlohmann::json spec = {{"ociVersion", "1.0.2"}, {"mounts", nlohmann::json::array()}};
    spec["mounts"].push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}});
    if (!shm_mount.is_null()) spec["mounts"].push_back(shm_mount);
    return spec;
  }
  static ShmDecision acting(std::uint64_t size, bool size_explicit = false) {
    ShmDecision d;
    d.act = true;
    d.size = size;
    d.size_explicit = size_explicit;
    return d;
  }
  static SpecFacts facts_of(const nlohmann::json& spec) {
    SpecFacts f = spec_facts(spec, "/bundle");
    f.has_ipc_namespace = true;
    return f;
  }
};

const nlohmann::json kTmpfs64m = {{"destination", "/dev/shm"},
                                  {"type", "tmpfs"},
                                  {"source", "shm"},
                                  {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=67108864"}}};

TEST_F(SpecEditTest, ATmpfsInTheSpecGetsTheSize) {
  nlohmann::json s = spec_with(kTmpfs64m);
  const SpecEdit e = edit_spec(s, facts_of(s), acting(512 * kMiB), "/usr/bin/gpu-run-hook", "/etc/c.json");
  EXPECT_EQ(e.kind, SpecEdit::kSpecSize);
  EXPECT_EQ(facts_of(s).shm_size, 512 * kMiB);
  EXPECT_FALSE(s.contains("hooks"));
  EXPECT_STREQ(edit_name(e.kind), "spec-size");
}

TEST_F(SpecEditTest, ALargerTmpfsIsKeptUnlessTheSizeWasExplicit) {
  nlohmann::json s = spec_with(kTmpfs64m);
  const nlohmann::json before = s;
  SpecEdit e = edit_spec(s, facts_of(s), acting(32 * kMiB), "/h", "/c");
  EXPECT_EQ(e.kind, SpecEdit::kUnchanged);
  EXPECT_EQ(e.detail, " before=64m");
  EXPECT_EQ(s, before);
  e = edit_spec(s, facts_of(s), acting(32 * kMiB, /*size_explicit=*/true), "/h", "/c");
  EXPECT_EQ(e.kind, SpecEdit::kSpecSize);
  EXPECT_EQ(facts_of(s).shm_size, 32 * kMiB);
}

TEST_F(SpecEditTest, NoTmpfsInjectsTheHookOnce) {
  nlohmann::json s = spec_with(nullptr);
  SpecEdit e = edit_spec(s, facts_of(s), acting(512 * kMiB), "/usr/bin/gpu-run-hook", "/etc/c.json");
  EXPECT_EQ(e.kind, SpecEdit::kInjectHook);
  ASSERT_EQ(s["hooks"]["createRuntime"].size(), 1u);
  EXPECT_EQ(s["hooks"]["createRuntime"][0]["path"], "/usr/bin/gpu-run-hook");
  EXPECT_EQ(s["hooks"]["createRuntime"][0]["args"],
            nlohmann::json({"gpu-run-hook", "--config", "/etc/c.json", "createRuntime"}));
  e = edit_spec(s, facts_of(s), acting(512 * kMiB), "/usr/bin/gpu-run-hook", "/etc/c.json");
  EXPECT_EQ(e.kind, SpecEdit::kUnchanged);
  EXPECT_EQ(s["hooks"]["createRuntime"].size(), 1u);
}

TEST_F(SpecEditTest, ABindMountAtDevShmGetsTheHookNotASize) {
  nlohmann::json s = spec_with({{"destination", "/dev/shm"},
                                {"type", "bind"},
                                {"source", "/var/lib/docker/containers/x/mounts/shm"},
                                {"options", {"rbind"}}});
  const SpecEdit e = edit_spec(s, facts_of(s), acting(512 * kMiB), "/h", "/c");
  EXPECT_EQ(e.kind, SpecEdit::kInjectHook);
  EXPECT_EQ(s["mounts"][1]["options"], nlohmann::json({"rbind"}));
}

}  // namespace
}  // namespace gpurun
