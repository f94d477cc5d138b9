#include "runtime/runtime.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "decision/shm_decision.hpp"
#include "door/door.hpp"
#include "oci/oci.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(RuntimeArgsTest, FindsTheBundleInEverySpelling) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--root", "/r", "--log", "/l.json", "--log-format", "json", "create",
                                              "--bundle", "/b", "--pid-file", "p", "id"},
                                             {"create", "--bundle=/b", "id"},
                                             {"--debug", "create", "-b", "/b", "id"},
                                             {"--systemd-cgroup", "create", "-b=/b", "id"},
                                             {"--root=/r", "run", "--bundle", "/b", "id"}}) {
    RuntimeArgs r = parse_runtime_args(args);
    EXPECT_TRUE(r.subcommand == "create" || r.subcommand == "run");
    EXPECT_EQ(r.bundle, "/b") << args[0];
  }
  RuntimeArgs r = parse_runtime_args({"--root", "/r", "--log", "/l.json", "--log-format", "json", "create", "id"});
  EXPECT_EQ(r.log, "/l.json");
  EXPECT_EQ(r.log_format, "json");
  EXPECT_FALSE(r.bundle);
}

TEST(RuntimeArgsTest, OtherSubcommandsAreNotInspected) {
  RuntimeArgs r = parse_runtime_args({"--root", "/r", "start", "--bundle", "/b", "id"});
  EXPECT_EQ(r.subcommand, "start");
  EXPECT_FALSE(r.bundle);
  EXPECT_EQ(parse_runtime_args({"--version"}).subcommand, "");
  EXPECT_EQ(parse_runtime_args({"features"}).subcommand, "features");
}

TEST(RuntimeArgsTest, FindsARealRuntimeButNeverItself) {
  EXPECT_THROW(find_real_runtime({"/nonexistent/runc", "no-such-runtime-xyz"}), Error);
  EXPECT_EQ(find_real_runtime({"no-such-runtime-xyz", "/bin/sh"}), "/bin/sh");
}

// A chain file's #! line runs `gpu-run-runtime --chain FILE <runc's argv>`.
TEST(RuntimeArgsTest, ItsOwnChainOptionComesFirstAndIsNotRuncs) {
  const RuntimeArgs r = parse_runtime_args(
      {"--chain", "/etc/docker/gpu-run-runtime.gpu-run", "--root", "/r", "create", "--bundle", "/b", "id"});
  EXPECT_EQ(r.chain, "/etc/docker/gpu-run-runtime.gpu-run");
  EXPECT_EQ(r.own, 2u);
  EXPECT_EQ(r.subcommand, "create");
  EXPECT_EQ(r.bundle, "/b");
  const RuntimeArgs plain = parse_runtime_args({"--root", "/r", "delete", "id"});
  EXPECT_FALSE(plain.chain);
  EXPECT_EQ(plain.own, 0u);
  // Only first: after runc's options it is not gpu-run-runtime's.
  EXPECT_FALSE(parse_runtime_args({"--root", "/r", "--chain", "/x", "state", "id"}).chain);
}

TEST(ChainedRuntimeTest, ExecsTheChainFilesRuntimeOrSaysWhatToDo) {
  test::TempDir d;
  d.write("ok", "#!/usr/bin/gpu-run-runtime --chain\n# a comment\nruntime=/bin/sh\n");
  EXPECT_EQ(chained_runtime((d / "ok").string()), "/bin/sh");

  d.write("gone", "#!/usr/bin/gpu-run-runtime --chain\nruntime=/nonexistent/nvidia-container-runtime\n");
  Error e = expect_error([&] { chained_runtime((d / "gone").string()); });
  EXPECT_EQ(e.exit_code(), kExitFailure);
  EXPECT_CONTAINS(e.what(), "runtime=/nonexistent/nvidia-container-runtime is not an executable file");
  EXPECT_CONTAINS(e.what(), "gpu-run-ctl configure docker");

  d.write("self", "#!/usr/bin/gpu-run-runtime --chain\nruntime=" + fs::read_symlink("/proc/self/exe").string() + "\n");
  e = expect_error([&] { chained_runtime((d / "self").string()); });
  EXPECT_CONTAINS(e.what(), "a loop");

  d.write("other", "#!/bin/sh\nexec runc \"$@\"\n");
  e = expect_error([&] { chained_runtime((d / "other").string()); });
  EXPECT_CONTAINS(e.what(), "not a chain file");
  e = expect_error([&] { chained_runtime((d / "missing").string()); });
  EXPECT_CONTAINS(e.what(), "gpu-run-runtime --chain chain file");
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
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

TEST(PrepareBundleTest, RefusesAProfileWhoseNameIsNotItsFiles) {
  test::TempDir d;
  d.write("profiles/mine.json", R"({"name": "other"})");
  const nlohmann::json config = {{"profile_dirs", {(d / "profiles").string(), GPU_RUN_SOURCE_PROFILES}},
                                 {"log_file", (d / "gpu-run.log").string()}};
  d.write("config.json", config.dump());
  const nlohmann::json spec = {{"ociVersion", "1.0.2"},
                               {"process", {{"env", {"GPU_RUN_PROFILE=mine"}}}},
                               {"mounts", nlohmann::json::array()},
                               {"linux", {{"namespaces", {{{"type", "ipc"}}}}}}};
  d.write("bundle/config.json", spec.dump());
  const DecisionContext ctx(d / "config.json", "gpu-run-runtime");
  const Error e = expect_error([&] { prepare_bundle((d / "bundle").string(), ctx, "/usr/sbin/runc"); });
  EXPECT_CONTAINS(e.what(), "key 'name': 'other' does not match the file's name");
}

// An explicit size over the container's memory budget: the runtime fails the start with
// core's answer, the one gpu-run (exit 2) and the webhook (deny) give.
TEST(PrepareBundleTest, AnExplicitSizeOverTheBudgetFailsTheStart) {
  test::TempDir d;
  d.write("config.json", nlohmann::json{{"log_file", (d / "gpu-run.log").string()}}.dump());
  nlohmann::json spec = {
      {"ociVersion", "1.0.2"},
      {"process", {{"env", {"GPU_RUN_SHM_SIZE=600m"}}}},
      {"mounts", nlohmann::json::array()},
      {"linux", {{"namespaces", {{{"type", "ipc"}}}}, {"resources", {{"memory", {{"limit", 1024 * 1024 * 1024}}}}}}}};
  d.write("bundle/config.json", spec.dump());
  const DecisionContext ctx(d / "config.json", "gpu-run-runtime");
  const Error e = expect_error([&] { prepare_bundle((d / "bundle").string(), ctx, "/usr/sbin/runc"); });
  EXPECT_CONTAINS(e.what(),
                  "shm-size 600MiB does not fit the memory limit 1GiB (shm pages count against it; at most 50% = "
                  "512MiB may be shm): raise the memory limit to at least 1200m or ask for less");
}

// The contract table (docs/ARCHITECTURE.md, "The container contract") as the runtime reads it:
// every fact under each name a container may give it (its environment name, the name's alias,
// its annotation) plans the same size, which differs from not giving it.
TEST(PrepareBundleTest, EveryNameOfAFactPlansTheSameSize) {
  test::TempDir d;
  d.write(
      "config.json",
      nlohmann::json{{"log_file", (d / "gpu-run.log").string()}, {"profile_dirs", {GPU_RUN_SOURCE_PROFILES}}}.dump());
  using Keys = std::map<std::string, std::string>;
  auto size_of = [&](const Keys& env, const Keys& annotations) -> std::uint64_t {
    nlohmann::json envs = nlohmann::json::array();
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    nlohmann::json spec = {{"ociVersion", "1.0.2"},
                           {"process", {{"env", envs}}},
                           {"mounts", nlohmann::json::array({kTmpfs64m})},
                           {"linux", {{"namespaces", {{{"type", "ipc"}}}}}}};
    if (!annotations.empty()) spec["annotations"] = annotations;
    d.write("bundle/config.json", spec.dump());
    const DecisionContext ctx(d / "config.json", "gpu-run-runtime");
    prepare_bundle((d / "bundle").string(), ctx, "/usr/sbin/runc");
    return spec_facts(load_spec(d / "bundle"), d / "bundle").shm_size.value_or(0);
  };
  const std::map<RequestKey, std::string> value = {{RequestKey::kProfile, "imagenet"},
                                                   {RequestKey::kGpus, "2"},
                                                   {RequestKey::kWorkers, "8"},
                                                   {RequestKey::kBatchSize, "128"},
                                                   {RequestKey::kShmSize, "3g"}};
  for (const RequestKeySpec& k : kRequestKeys) {
    Keys base = {{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_GPUS", "2"}};
    base.erase(k.env);
    const std::uint64_t without = size_of(base, {});
    Keys by_env = base;
    by_env[k.env] = value.at(k.key);
    const std::uint64_t want = size_of(by_env, {});
    EXPECT_NE(want, without) << k.name << ": the test's value must change the size";
    EXPECT_EQ(size_of(base, {{k.annotation, value.at(k.key)}}), want) << k.annotation;
    if (k.env_alias) {
      Keys by_alias = base;
      by_alias[k.env_alias] = value.at(k.key);
      EXPECT_EQ(size_of(by_alias, {}), want) << k.env_alias;
    }
  }
}

// gpu-run-runtime's door: a container that names an unreadable profile file (a link to itself)
// fails its start (exit 1: gpu-run-runtime(1), EXIT STATUS) with the file's errno and the errno's
// words, kept from the store that read it.
TEST(PrepareBundleTest, AnUnreadableProfileFailsTheStartWithItsErrno) {
  test::TempDir d;
  fs::create_directories(d / "profiles");
  fs::create_symlink("loop.json", d / "profiles/loop.json");
  d.write(
      "config.json",
      nlohmann::json{{"log_file", (d / "gpu-run.log").string()}, {"profile_dirs", {(d / "profiles").string()}}}.dump());
  const nlohmann::json spec = {{"ociVersion", "1.0.2"},
                               {"process", {{"env", {"GPU_RUN_PROFILE=loop"}}}},
                               {"mounts", nlohmann::json::array({kTmpfs64m})},
                               {"linux", {{"namespaces", {{{"type", "ipc"}}}}}}};
  d.write("bundle/config.json", spec.dump());
  const DecisionContext ctx(d / "config.json", "gpu-run-runtime");
  const Error e = expect_error([&] { prepare_bundle((d / "bundle").string(), ctx, "/usr/sbin/runc"); });
  EXPECT_EQ(e.exit_code(), kExitFailure);
  EXPECT_EQ(e.errno_value(), ELOOP);
  EXPECT_CONTAINS(e.what(), (d / "profiles/loop.json").string() + ": cannot open: " + std::strerror(ELOOP));
}

// The issue's traps at the runtime: GPU_RUN_NUM_WORKERS=8 planned the default workers, and a
// command line of other workers went unsaid. Two values for the workers fail the start, naming both.
TEST(PrepareBundleTest, TheCommandLinesWorkersAreLoggedAndRecordedAndTwoWorkerValuesFail) {
  test::TempDir d;
  d.write(
      "config.json",
      nlohmann::json{{"log_file", (d / "gpu-run.log").string()}, {"profile_dirs", {GPU_RUN_SOURCE_PROFILES}}}.dump());
  nlohmann::json spec = {
      {"ociVersion", "1.0.2"},
      {"process", {{"env", {"GPU_RUN_PROFILE=imagenet"}}, {"args", {"sh", "-c", "python t.py -j 8"}}}},
      {"mounts", nlohmann::json::array({kTmpfs64m})},
      {"linux", {{"namespaces", {{{"type", "ipc"}}}}}}};
  d.write("bundle/config.json", spec.dump());
  const DecisionContext ctx(d / "config.json", "gpu-run-runtime");
  prepare_bundle((d / "bundle").string(), ctx, "/usr/sbin/runc");
  const std::string log = test::read_text(d / "gpu-run.log");
  EXPECT_CONTAINS(log, "action=warn warning=");
  EXPECT_CONTAINS(log, "the command line's '-j 8' asks for 8 DataLoader workers");
  EXPECT_CONTAINS(log, "set GPU_RUN_WORKERS=8");
  const nlohmann::json written = load_spec(d / "bundle");
  const DecisionRecord r = parse_decision(written["annotations"][kDecisionKey].get<std::string>(), "test");
  EXPECT_EQ(r.command_flag, "-j 8");
  EXPECT_EQ(r.command_workers, 8u);
  EXPECT_NE(r.workers, 8u);

  spec["process"]["env"] = {"GPU_RUN_PROFILE=imagenet", "GPU_RUN_WORKERS=4", "GPU_RUN_NUM_WORKERS=8"};
  d.write("bundle/config.json", spec.dump());
  const Error e = expect_error([&] { prepare_bundle((d / "bundle").string(), ctx, "/usr/sbin/runc"); });
  EXPECT_CONTAINS(e.what(),
                  "GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values: give one");
}

}  // namespace
}  // namespace gpurun
