#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "commands.hpp"
#include "config.hpp"
#include "configure_docker.hpp"
#include "configure_podman.hpp"
#include "contract.hpp"
#include "error.hpp"
#include "k8s.hpp"
#include "plan.hpp"
#include "profiles.hpp"
#include "profiles_validate.hpp"
#include "units.hpp"
#include "yaml.hpp"

namespace gpurun {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;

// A fresh directory that removes itself.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/gpu-run-ctl-test.XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& rel, const std::string& text) const {
    fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  fs::path path_;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An environment with nothing but the source tree's built-in profiles, so that no
// user or host profile changes a test.
std::optional<std::string> builtin_only_env(const std::string& name) {
  if (name == "GPU_RUN_BUILTIN_PROFILES") return std::string(GPU_RUN_SOURCE_PROFILES);
  return std::nullopt;
}

HostInfo host_with_cpus(unsigned cpus) {
  HostInfo h;
  h.cpus = cpus;
  h.affinity_cpus = cpus;
  h.mem_total = 64 * GiB;
  h.mem_available = 32 * GiB;
  return h;
}

template <typename F>
Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected gpurun::Error";
  return Error("none");
}

// ---------------------------------------------------------------- daemon.json

constexpr const char* kRuntime = "/usr/bin/gpu-run-runtime";

TEST(DaemonJson, AddsTheRuntimeAndKeepsEveryOtherKeyInOrder) {
  const std::string existing = R"({
    "log-driver": "json-file",
    "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": ["--debug"]}},
    "storage-driver": "overlay2",
    "default-shm-size": "64M"
  })";
  FileEdit edit = merge_daemon_json(existing, "daemon.json", kRuntime, false);
  EXPECT_TRUE(edit.changed);
  ordered_json out = ordered_json::parse(edit.text);
  EXPECT_EQ(out["runtimes"]["gpu-run"], ordered_json({{"path", kRuntime}}));
  EXPECT_EQ(out["runtimes"]["nvidia"]["runtimeArgs"], ordered_json({"--debug"}));
  EXPECT_EQ(out["log-driver"], "json-file");
  EXPECT_EQ(out["default-shm-size"], "64M");
  EXPECT_FALSE(out.contains("default-runtime"));
  std::vector<std::string> keys;
  for (const auto& [k, v] : out.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"log-driver", "runtimes", "storage-driver", "default-shm-size"}));
}

TEST(DaemonJson, IsIdempotent) {
  FileEdit first = merge_daemon_json(std::string(R"({"debug": true})"), "daemon.json", kRuntime, true);
  ASSERT_TRUE(first.changed);
  FileEdit second = merge_daemon_json(first.text, "daemon.json", kRuntime, true);
  EXPECT_FALSE(second.changed);
  EXPECT_EQ(second.text, first.text);
  // Also without --set-default once the default is ours, and with other formatting.
  FileEdit third = merge_daemon_json(json::parse(first.text).dump(), "daemon.json", kRuntime, false);
  EXPECT_FALSE(third.changed);
}

TEST(DaemonJson, MissingOrBlankFileStartsFromNothing) {
  for (const std::optional<std::string>& existing : {std::optional<std::string>(), std::optional<std::string>(" \n")}) {
    FileEdit edit = merge_daemon_json(existing, "daemon.json", kRuntime, false);
    EXPECT_TRUE(edit.changed);
    EXPECT_EQ(json::parse(edit.text),
              json::parse(R"({"runtimes": {"gpu-run": {"path": "/usr/bin/gpu-run-runtime"}}})"));
  }
}

TEST(DaemonJson, SetDefaultReplacesAnotherDefaultAndSaysSo) {
  FileEdit edit = merge_daemon_json(std::string(R"({"default-runtime": "nvidia"})"), "d.json", kRuntime, true);
  EXPECT_EQ(json::parse(edit.text)["default-runtime"], "gpu-run");
  ASSERT_FALSE(edit.notes.empty());
  EXPECT_CONTAINS(edit.notes.front(), "nvidia");
  // Without --set-default another default stays.
  FileEdit kept = merge_daemon_json(std::string(R"({"default-runtime": "nvidia"})"), "d.json", kRuntime, false);
  EXPECT_EQ(json::parse(kept.text)["default-runtime"], "nvidia");
}

TEST(DaemonJson, UpdatesAMovedRuntimeKeepingItsArgs) {
  FileEdit edit = merge_daemon_json(
      std::string(R"({"runtimes": {"gpu-run": {"path": "/opt/old/gpu-run-runtime", "runtimeArgs": ["--x"]}}})"),
      "d.json", kRuntime, false);
  EXPECT_TRUE(edit.changed);
  json out = json::parse(edit.text);
  EXPECT_EQ(out["runtimes"]["gpu-run"]["path"], kRuntime);
  EXPECT_EQ(out["runtimes"]["gpu-run"]["runtimeArgs"], json({"--x"}));
  ASSERT_FALSE(edit.notes.empty());
  EXPECT_CONTAINS(edit.notes.front(), "/opt/old/gpu-run-runtime");
}

TEST(DaemonJson, MalformedInputIsRejectedWithLineAndColumn) {
  Error e = expect_error(
      [] { merge_daemon_json(std::string("{\n  \"debug\": true,\n}\n"), "/etc/docker/daemon.json", kRuntime, false); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "/etc/docker/daemon.json:3:1: malformed JSON");
  EXPECT_CONTAINS(e.what(), "leaves it as it is");
}

TEST(DaemonJson, WrongShapesAreRejected) {
  for (const char* text : {"[]", R"({"runtimes": []})", R"({"runtimes": {"gpu-run": "/usr/bin/x"}})"}) {
    Error e = expect_error([&] { merge_daemon_json(std::string(text), "d.json", kRuntime, false); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << text;
    EXPECT_CONTAINS(e.what(), "d.json");
  }
  Error e = expect_error([] { merge_daemon_json(std::string(R"({"default-runtime": 1})"), "d.json", kRuntime, true); });
  EXPECT_CONTAINS(e.what(), "default-runtime");
}

// ---------------------------------------------------------------- hooks.d

TEST(HooksD, DocumentIsTheHooksDSchemaAtCreateRuntime) {
  const ordered_json doc = hooks_d_document("/usr/bin/gpu-run-hook", "/etc/gpu-run/config.json", false);
  const json expected = json::parse(R"({
    "version": "1.0.0",
    "hook": {"path": "/usr/bin/gpu-run-hook",
             "args": ["gpu-run-hook", "--config", "/etc/gpu-run/config.json", "createRuntime"]},
    "when": {"annotations": {"^gpu-run\\.(profile|gpus|workers|batch-size|shm-size)$": ".*"}},
    "stages": ["createRuntime"]
  })");
  EXPECT_EQ(json::parse(doc.dump()), expected);
  EXPECT_EQ(doc.begin().key(), "version");
}

TEST(HooksD, AlwaysStandsAloneInWhen) {
  const ordered_json doc = hooks_d_document("/h", "/c", true);
  EXPECT_EQ(json::parse(doc["when"].dump()), json::parse(R"({"always": true})"));
}

TEST(HooksD, AnnotationPatternMatchesExactlyGpuRunsKeys) {
  const std::regex ere(request_annotation_pattern(), std::regex::extended);
  for (const char* key :
       {"gpu-run.profile", "gpu-run.gpus", "gpu-run.workers", "gpu-run.batch-size", "gpu-run.shm-size"})
    EXPECT_TRUE(std::regex_search(key, ere)) << key;
  for (const char* key :
       {"gpu-runXprofile", "xgpu-run.profile", "gpu-run.profiles", "gpu-run.", "io.kubernetes.cri-o.ShmSize"})
    EXPECT_FALSE(std::regex_search(key, ere)) << key;
}

TEST(HooksD, EditIsIdempotentAndRefusesMalformedFiles) {
  const ordered_json wanted = hooks_d_document("/usr/bin/gpu-run-hook", "/etc/gpu-run/config.json", false);
  EXPECT_TRUE(hook_file_edit(std::nullopt, "f.json", wanted).changed);
  EXPECT_FALSE(hook_file_edit(wanted.dump(), "f.json", wanted).changed);
  FileEdit other = hook_file_edit(std::string(R"({"version": "1.0.0"})"), "f.json", wanted);
  EXPECT_TRUE(other.changed);
  EXPECT_FALSE(other.notes.empty());
  Error e = expect_error([&] { hook_file_edit(std::string("{\"version\":"), "/x/gpu-run.json", wanted); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "/x/gpu-run.json:1:");
}

// ---------------------------------------------------------------- packaging

TEST(Packaging, DefaultConfigHasEveryKeyAndParses) {
  const std::string path = std::string(GPU_RUN_SOURCE_PACKAGING) + "/config.json";
  const std::string text = read_text(path);
  const json doc = json::parse(text);
  for (const char* key : {"default_profile", "engine", "gpu_request", "profile_dirs", "runtimes", "hook_path",
                          "log_file", "log_level", "on_error", "memory_fraction_max"})
    EXPECT_TRUE(doc.contains(key)) << key;
  const Config c = parse_config(text, path);
  EXPECT_FALSE(c.default_profile);
  EXPECT_EQ(c.engine, "docker");
  EXPECT_EQ(c.gpu_request, "docker");
  EXPECT_TRUE(c.profile_dirs.empty());
  EXPECT_EQ(c.runtimes, std::vector<std::string>{"runc"});
  EXPECT_EQ(c.hook_path, "/usr/bin/gpu-run-hook");
  EXPECT_EQ(c.log_file, "/var/log/gpu-run.log");
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.on_error, "warn");
  EXPECT_DOUBLE_EQ(c.memory_fraction_max, 0.5);
}

TEST(Packaging, HooksFileIsWhatConfigurePodmanWrites) {
  const json shipped = json::parse(read_text(std::string(GPU_RUN_SOURCE_PACKAGING) + "/hooks.d/gpu-run.json"));
  EXPECT_EQ(shipped, json::parse(hooks_d_document("/usr/bin/gpu-run-hook", kDefaultConfigPath, false).dump()));
}

TEST(Packaging, DaemonJsonSnippetIsWhatConfigureDockerWrites) {
  const json shipped = json::parse(read_text(std::string(GPU_RUN_SOURCE_PACKAGING) + "/daemon.json"));
  EXPECT_EQ(shipped, json::parse(merge_daemon_json(std::nullopt, "d.json", kRuntime, false).text));
}

// ---------------------------------------------------------------- k8s

TEST(K8sQuantity, FormatsInTheLargestExactBinaryUnit) {
  EXPECT_EQ(k8s_quantity(1556 * MiB), "1556Mi");
  EXPECT_EQ(k8s_quantity(2 * GiB), "2Gi");
  EXPECT_EQ(k8s_quantity(GiB + GiB / 2), "1536Mi");
  EXPECT_EQ(k8s_quantity(1024ull * GiB), "1Ti");
  EXPECT_EQ(k8s_quantity(4096), "4Ki");
  EXPECT_EQ(k8s_quantity(4097), "4097");
  EXPECT_EQ(k8s_quantity(0), "0");
}

TEST(K8sQuantity, ParsesKubernetesMemoryQuantities) {
  EXPECT_EQ(parse_k8s_quantity("16Gi", "--memory"), 16 * GiB);
  EXPECT_EQ(parse_k8s_quantity("512Mi", "--memory"), 512 * MiB);
  EXPECT_EQ(parse_k8s_quantity("1.5Gi", "--memory"), GiB + GiB / 2);
  EXPECT_EQ(parse_k8s_quantity("16G", "--memory"), 16000000000ull);
  EXPECT_EQ(parse_k8s_quantity("1.5k", "--memory"), 1500u);
  EXPECT_EQ(parse_k8s_quantity("123", "--memory"), 123u);
  EXPECT_EQ(parse_k8s_quantity("0.5Ki", "--memory"), 512u);
}

TEST(K8sQuantity, RejectsOtherSyntaxNamingTheFlag) {
  for (const char* bad :
       {"", "16g", "16m", "16GB", "1e3", "-1Gi", "Gi", "0", "0.0Mi", " 1Gi", "99999999999999999999"}) {
    Error e = expect_error([&] { parse_k8s_quantity(bad, "--memory"); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
    EXPECT_CONTAINS(e.what(), "--memory");
  }
  EXPECT_CONTAINS(expect_error([] { parse_k8s_quantity("16g", "--memory"); }).what(), "16Gi");
}

ShmPlan sample_plan(unsigned gpus) {
  ShmPlan p;
  p.profile = "imagenet";
  p.gpus = gpus;
  p.ranks = std::max(gpus, 1u);
  p.workers = 4;
  p.batch_size = 64;
  p.shm = 1556 * MiB;
  return p;
}

TEST(K8sPatch, HasExactKubernetesFieldsAndRaisesMemoryByTheShmSize) {
  K8sOptions o;
  o.memory = "16Gi";
  o.runtime_class = "nvidia";
  const json patch = json::parse(k8s_patch(o, sample_plan(2)).dump());
  const json expected = json::parse(R"({
    "spec": {
      "runtimeClassName": "nvidia",
      "containers": [{
        "name": "main",
        "env": [{"name": "GPU_RUN_PROFILE", "value": "imagenet"},
                {"name": "GPU_RUN_NUM_WORKERS", "value": "4"},
                {"name": "GPU_RUN_BATCH_SIZE", "value": "64"},
                {"name": "GPU_RUN_SHM_SIZE", "value": "1556m"}],
        "resources": {"requests": {"memory": "17940Mi"},
                      "limits": {"memory": "17940Mi", "nvidia.com/gpu": "2"}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]
      }],
      "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1556Mi"}}]
    }
  })");
  EXPECT_EQ(patch, expected);
}

TEST(K8sPatch, WithoutMemoryUsesTheStatedBasePerRankAndNoGpuLimitForZero) {
  K8sOptions o;
  o.container = "trainer";
  const json patch = json::parse(k8s_patch(o, sample_plan(0)).dump());
  const json& c = patch["spec"]["containers"][0];
  EXPECT_EQ(c["name"], "trainer");
  EXPECT_EQ(c["resources"]["limits"]["memory"], k8s_quantity(kK8sBaseMemoryPerRank + 1556 * MiB));
  EXPECT_FALSE(c["resources"]["limits"].contains("nvidia.com/gpu"));
  EXPECT_FALSE(patch["spec"].contains("runtimeClassName"));
  const json two = json::parse(k8s_patch(o, sample_plan(2)).dump());
  EXPECT_EQ(two["spec"]["containers"][0]["resources"]["requests"]["memory"],
            k8s_quantity(2 * kK8sBaseMemoryPerRank + 1556 * MiB));
}

TEST(K8sPatch, RejectsNamesKubernetesWouldRefuse) {
  K8sOptions o;
  o.container = "Main_1";
  EXPECT_CONTAINS(expect_error([&] { k8s_patch(o, sample_plan(1)); }).what(), "--container");
  o.container = "main";
  o.runtime_class = "Nvidia";
  EXPECT_CONTAINS(expect_error([&] { k8s_patch(o, sample_plan(1)); }).what(), "--runtime-class");
}

TEST(K8sRender, PlansLikeGpuRunAndPrintsJsonOrYaml) {
  K8sOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "4";
  o.format = "json";
  const std::string out = render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env);
  const json patch = json::parse(out);
  const json& vol = patch["spec"]["volumes"][0];
  EXPECT_EQ(vol["emptyDir"]["medium"], "Memory");
  // The same plan as `plan` makes.
  PlanOptions po;
  po.sizing.profile = "imagenet";
  po.sizing.gpus = "2";
  po.sizing.workers = "4";
  const ShmPlan plan = make_plan(po, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_EQ(vol["emptyDir"]["sizeLimit"], k8s_quantity(plan.shm));
  o.format = "yaml";
  const std::string yaml = render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_EQ(yaml.rfind("# gpu-run-ctl k8s:", 0), 0u);
  EXPECT_CONTAINS(yaml, "      emptyDir:\n        medium: \"Memory\"\n");
  o.format = "xml";
  EXPECT_CONTAINS(expect_error([&] { render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env); }).what(),
                  "--format");
  o.format = "json";
  o.sizing.gpus = "two";
  EXPECT_CONTAINS(expect_error([&] { render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env); }).what(), "--gpus");
}

// ---------------------------------------------------------------- YAML

TEST(Yaml, QuotesEveryStringSafely) {
  EXPECT_EQ(yaml_quote("yes"), "\"yes\"");
  EXPECT_EQ(yaml_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(yaml_quote("l1\nl2\t"), "\"l1\\nl2\\t\"");
  EXPECT_EQ(yaml_quote(std::string("\x01\x7f", 2)), "\"\\u0001\\u007f\"");
  EXPECT_EQ(yaml_quote("\xc2\x85"), "\"\\u0085\"");
  EXPECT_EQ(yaml_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

TEST(Yaml, WritesBlockStyle) {
  const ordered_json doc = ordered_json::parse(R"({
    "spec": {"containers": [{"name": "main", "args": ["a", 1, true, null]}], "empty": [], "o": {}},
    "yes": "no", "nvidia.com/gpu": "2", "x y": 0.5
  })");
  EXPECT_EQ(to_yaml(doc),
            "spec:\n"
            "  containers:\n"
            "    - name: \"main\"\n"
            "      args:\n"
            "        - \"a\"\n"
            "        - 1\n"
            "        - true\n"
            "        - null\n"
            "  empty: []\n"
            "  o: {}\n"
            "\"yes\": \"no\"\n"
            "nvidia.com/gpu: \"2\"\n"
            "\"x y\": 0.5\n");
}

// Reads the YAML back with a real YAML parser when the machine has one.
TEST(Yaml, ReadsBackAsTheSameValueWithPyYaml) {
  if (std::system("python3 -c 'import yaml' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 with PyYAML not found";
  TempDir dir;
  const ordered_json doc = ordered_json::parse(R"({
    "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "yes"}, {"name": "B", "value": "0755"},
             {"name": "C", "value": "1e3"}, {"name": "D", "value": "a: b # c"}, {"name": "E", "value": "\"q\"\n\\"},
             {"name": "F", "value": "~"}, {"name": "G", "value": "- x"}, {"name": "H", "value": ""}]}],
             "nested": [[1, 2], [{"k": "v"}]], "on": true, "null": null}
  })");
  const fs::path yaml = dir.write("doc.yaml", to_yaml(doc));
  const fs::path out = dir.path() / "doc.json";
  const std::string cmd =
      "python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1])), open(sys.argv[2], \"w\"))' " +
      yaml.string() + " " + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(yaml);
  EXPECT_EQ(json::parse(read_text(out)), json::parse(doc.dump())) << read_text(yaml);
}

// ---------------------------------------------------------------- plan

TEST(Plan, MatchesTheModelForTheBuiltInProfile) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "4";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_EQ(plan.profile, "imagenet");
  EXPECT_EQ(plan.ranks, 2u);
  EXPECT_EQ(plan.workers, 4u);
  EXPECT_TRUE(plan.problem.empty());
  EXPECT_GE(plan.shm, 256 * MiB);
}

TEST(Plan, CpusDescribeTheTargetMachineNotThisOne) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.cpus = "32";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  EXPECT_EQ(plan.cpus, 32u);
  EXPECT_GT(plan.workers, 2u);
}

TEST(Plan, DefaultsToTheConfigsDefaultProfile) {
  Config c;
  c.default_profile = "mnist";
  const ShmPlan plan = make_plan(PlanOptions{}, c, host_with_cpus(4), builtin_only_env);
  EXPECT_EQ(plan.profile, "mnist");
}

TEST(Plan, ArgumentErrorsNameTheFlag) {
  struct Case {
    void (*set)(PlanOptions&);
    const char* flag;
  };
  const Case cases[] = {
      {[](PlanOptions& o) { o.sizing.workers = "abc"; }, "--workers"},
      {[](PlanOptions& o) { o.sizing.workers = "-1"; }, "--workers"},
      {[](PlanOptions& o) { o.sizing.batch_size = "0"; }, "--batch-size"},
      {[](PlanOptions& o) { o.sizing.prefetch_factor = "1.5"; }, "--prefetch-factor"},
      {[](PlanOptions& o) { o.sizing.gpus = "two"; }, "--gpus"},
      {[](PlanOptions& o) { o.memory = "12q"; }, "--memory"},
      {[](PlanOptions& o) { o.cpus = "0"; }, "--cpus"},
      {[](PlanOptions& o) { o.sizing.profile = "no-such-profile"; }, "no-such-profile"},
      {[](PlanOptions& o) { o.sizing.profile = "../etc/passwd"; }, "not a valid profile name"},
  };
  for (const Case& c : cases) {
    PlanOptions o;
    o.sizing.profile = "imagenet";
    c.set(o);
    Error e = expect_error([&] { make_plan(o, Config{}, host_with_cpus(4), builtin_only_env); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << c.flag;
    EXPECT_CONTAINS(e.what(), c.flag);
  }
}

TEST(Plan, APlanThatDoesNotFitCarriesTheProblem) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "8";
  o.memory = "2g";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_CONTAINS(plan.problem, "memory limit");
  EXPECT_EQ(expect_error([&] { require_fits(plan); }).exit_code(), kExitUsage);
}

TEST(Cli, UsageErrorsExitTwo) {
  for (const char* args : {"", "plan --bogus", "plan --profile", "k8s --profile imagenet", "profiles", "profiles show",
                           "configure", "configure docker --set-default=maybe", "nope"}) {
    CLI::App app;
    add_ctl_commands(app);
    try {
      app.parse(args, false);
      ADD_FAILURE() << "parsed: " << args;
    } catch (const CLI::ParseError& e) {
      testing::internal::CaptureStderr();
      EXPECT_EQ(report_parse_error(app, e), kExitUsage) << args;
      const std::string err = testing::internal::GetCapturedStderr();
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
      EXPECT_CONTAINS(err, "--help");
    }
  }
}

TEST(Cli, HelpExitsZero) {
  CLI::App app;
  add_ctl_commands(app);
  try {
    app.parse("k8s --help", false);
    ADD_FAILURE() << "no help";
  } catch (const CLI::ParseError& e) {
    testing::internal::CaptureStdout();
    EXPECT_EQ(report_parse_error(app, e), 0);
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_CONTAINS(out, "--runtime-class");
    EXPECT_CONTAINS(out, "4Gi per GPU rank");
  }
}

// ---------------------------------------------------------------- profiles

TEST(ProfileNameFor, IsRelativeToTheDirectoryThatHoldsIt) {
  EXPECT_EQ(profile_name_for("/p/vision/resnet50.json", {"/q", "/p"}), "vision/resnet50");
  EXPECT_EQ(profile_name_for("/p/imagenet.json", {"/p/"}), "imagenet");
  EXPECT_EQ(profile_name_for("/elsewhere/x.json", {"/p"}), "x");
}

TEST(ProfilesList, ShowsShadowedFilesChainsAndErrors) {
  TempDir dir;
  dir.write("mine/imagenet.json", R"({"extends": "default", "batch_size": 8})");
  dir.write("mine/broken.json", R"({"extends": "missing"})");
  ProfileStore store({dir.path() / "mine", GPU_RUN_SOURCE_PROFILES});
  const json listing = list_profiles(store);
  json imagenet, broken;
  for (const auto& p : listing["profiles"]) {
    if (p["name"] == "imagenet") imagenet = p;
    if (p["name"] == "broken") broken = p;
  }
  ASSERT_FALSE(imagenet.is_null());
  EXPECT_EQ(imagenet["path"], (dir.path() / "mine/imagenet.json").string());
  ASSERT_EQ(imagenet["shadowed"].size(), 1u);
  EXPECT_EQ(imagenet["chain"][1]["name"], "default");
  ASSERT_FALSE(broken.is_null());
  EXPECT_CONTAINS(broken["error"].get<std::string>(), "unknown parent profile 'missing'");
}

TEST(ProfilesShow, GivesTheMergedProfileAndChain) {
  ProfileStore store({GPU_RUN_SOURCE_PROFILES});
  const json shown = show_profile(store, "multi-gpu");
  EXPECT_EQ(shown["profile"]["name"], "multi-gpu");
  ASSERT_EQ(shown["chain"].size(), 3u);
  EXPECT_EQ(shown["chain"][1]["name"], "imagenet");
  EXPECT_EQ(shown["chain"][2]["name"], "default");
  EXPECT_THROW(show_profile(store, "nope"), Error);
}

TEST(ProfilesValidate, ListsEveryErrorOfAFileOneLineEach) {
  const std::vector<std::string> errors = profile_document_errors(
      R"({"batch_size": 0, "prefetch_factor": "two", "colour": 1, "headroom": 1.25})", "/t/p.json");
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) {
    EXPECT_EQ(e.rfind("/t/p.json: key '", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
  EXPECT_TRUE(profile_document_errors(R"({"batch_size": 1})", "p.json").empty());
  const auto syntax = profile_document_errors("{\n  \"batch_size\": 1,,\n}", "p.json");
  ASSERT_EQ(syntax.size(), 1u);
  EXPECT_CONTAINS(syntax[0], "p.json:2:19: malformed JSON");
  const auto both = profile_document_errors(
      R"({"fields": [{"name": "x", "shape": [2], "dtype": "uint8"}], "sample_bytes": 4})", "p.json");
  ASSERT_EQ(both.size(), 1u);
  EXPECT_CONTAINS(both[0], "exclude each other");
}

TEST(ProfilesValidate, ChecksNamesPlacesAndExtendsAcrossATeamRepository) {
  TempDir dir;
  dir.write("repo/vision/base.json", R"({"name": "vision/base", "extends": "default", "batch_size": 16})");
  dir.write("repo/vision/resnet50.json", R"({"name": "vision/resnet50", "extends": "vision/base"})");
  dir.write("repo/vision/misnamed.json", R"({"name": "other", "extends": "default"})");
  dir.write("repo/vision/orphan.json", R"({"extends": "vision/nothing"})");
  dir.write("repo/vision/bad.json", R"({"batch_size": -1, "typo": 1})");
  dir.write("repo/vision/incomplete.json", R"({"batch_size": 2})");
  dir.write("repo/Team/x.json", R"({"extends": "default"})");
  dir.write("repo/profile.schema.json", R"({"$schema": "not a profile"})");
  dir.write("repo/README.md", "not json");
  const std::vector<fs::path> builtin = {GPU_RUN_SOURCE_PROFILES};

  const ValidationReport report = validate_profiles({dir.path() / "repo"}, true, builtin);
  EXPECT_EQ(report.files.size(), 7u);
  EXPECT_EQ(report.valid.size(), 2u);  // vision/base, vision/resnet50
  std::string all;
  for (const auto& e : report.errors) all += e + "\n";
  EXPECT_EQ(report.errors.size(), 6u) << all;
  EXPECT_CONTAINS(all, "misnamed.json: key 'name': 'other' does not match");
  EXPECT_CONTAINS(all, "orphan.json: key 'extends': unknown parent profile 'vision/nothing'");
  EXPECT_CONTAINS(all, "bad.json: key 'batch_size'");
  EXPECT_CONTAINS(all, "bad.json: key 'typo': unknown key");
  EXPECT_CONTAINS(all, "incomplete.json: key 'prefetch_factor': missing");
  EXPECT_CONTAINS(all, "x.json: file name: 'Team/x' is not a valid profile name");

  // The team directory on its own: "vision/..." names still resolve and match.
  const ValidationReport team = validate_profiles({dir.path() / "repo" / "vision"}, true, builtin);
  EXPECT_EQ(team.files.size(), 6u);
  EXPECT_EQ(team.valid.size(), 2u);
}

TEST(ProfilesValidate, MissingExplicitPathIsAnErrorButNotOnTheSearchPath) {
  EXPECT_EQ(validate_profiles({"/nonexistent/gpu-run"}, true, {}).errors.size(), 1u);
  EXPECT_TRUE(validate_profiles({"/nonexistent/gpu-run"}, false, {}).errors.empty());
  const ValidationReport builtin = validate_profiles({GPU_RUN_SOURCE_PROFILES}, true, {});
  EXPECT_TRUE(builtin.errors.empty());
  EXPECT_GE(builtin.files.size(), 8u);
}

}  // namespace
}  // namespace gpurun
