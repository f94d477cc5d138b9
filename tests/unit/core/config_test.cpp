#include "decision/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using test::read_text;
using test::TempDir;

void expect_defaults(const Config& c) {
  EXPECT_FALSE(c.default_profile.has_value());
  EXPECT_EQ(c.engine, "docker");
  EXPECT_EQ(c.gpu_request, "");
  EXPECT_TRUE(c.profile_dirs.empty());
  EXPECT_EQ(c.runtimes, std::vector<std::string>{"runc"});
  EXPECT_EQ(c.hook_path, fs::path());
  EXPECT_EQ(c.log_file, fs::path("/var/log/gpu-run.log"));
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.on_error, OnError::kWarn);
  EXPECT_DOUBLE_EQ(c.memory_fraction_max, 0.5);
  EXPECT_EQ(c.perf_log, fs::path());
  EXPECT_DOUBLE_EQ(c.guard.min_free_fraction, 0.25);
  EXPECT_DOUBLE_EQ(c.guard.step_fraction, 0.5);
}

TEST(Config, MissingFileGivesDefaults) {
  TempDir d;
  Config c = load_config(d / "config.json");
  expect_defaults(c);
  EXPECT_EQ(c.source, fs::path());
}

TEST(Config, EmptyObjectGivesDefaults) {
  TempDir d;
  fs::path p = d.write("config.json", "{}");
  Config c = load_config(p);
  expect_defaults(c);
  EXPECT_EQ(c.source, p);
}

TEST(Config, PassthroughRuntimesNeverThrowForABrokenConfig) {
  TempDir d;
  const std::vector<std::string> runc{"runc"}, crun{"crun", "/usr/bin/runc"};
  EXPECT_EQ(passthrough_runtimes(d / "missing.json"), runc);
  EXPECT_EQ(passthrough_runtimes(d.write("good.json", R"({"runtimes": ["crun", "/usr/bin/runc"]})")), crun);
  // Another key is bad: the file's own runtimes still hold.
  EXPECT_EQ(passthrough_runtimes(d.write("bad-key.json", R"({"runtimes": ["crun", "/usr/bin/runc"], "x": 1})")), crun);
  EXPECT_THROW(load_config(d / "bad-key.json"), Error);
  // Not JSON, runtimes malformed, not an object, a number out of range, a directory: the default.
  for (const char* text :
       {"{", R"({"runtimes": "crun"})", R"({"runtimes": []})", "[1]", R"({"memory_fraction_max": 1e999})"}) {
    const fs::path p = d.write("broken.json", text);
    EXPECT_THROW(load_config(p), Error) << text;
    EXPECT_EQ(passthrough_runtimes(p), runc) << text;
  }
  fs::create_directory(d / "dir.json");
  EXPECT_THROW(load_config(d / "dir.json"), Error);
  EXPECT_EQ(passthrough_runtimes(d / "dir.json"), runc);
}

TEST(Config, EveryKeyParsed) {
  TempDir d;
  fs::path p = d.write("config.json", R"({
    "$schema": "config.schema.json",
    "comment": "managed by ansible",
    "default_profile": "vision/resnet50",
    "engine": "podman",
    "gpu_request": "none",
    "profile_dirs": ["/opt/a", "/opt/b"],
    "runtimes": ["crun", "/usr/bin/runc"],
    "hook_path": "/usr/libexec/gpu-run-hook",
    "log_file": "/tmp/gpu-run.log",
    "log_level": "debug",
    "on_error": "fail",
    "memory_fraction_max": 0.75,
    "perf_log": "/var/lib/gpu-run/perf.jsonl",
    "guard": {"min_free_fraction": 0.1, "step_fraction": 1}
  })");
  Config c = load_config(p);
  EXPECT_EQ(c.default_profile, std::optional<std::string>("vision/resnet50"));
  EXPECT_EQ(c.engine, "podman");
  EXPECT_EQ(c.gpu_request, "none");
  EXPECT_EQ(c.profile_dirs, (std::vector<fs::path>{"/opt/a", "/opt/b"}));
  EXPECT_EQ(c.runtimes, (std::vector<std::string>{"crun", "/usr/bin/runc"}));
  EXPECT_EQ(c.hook_path, fs::path("/usr/libexec/gpu-run-hook"));
  EXPECT_EQ(c.log_file, fs::path("/tmp/gpu-run.log"));
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.on_error, OnError::kFail);
  EXPECT_DOUBLE_EQ(c.memory_fraction_max, 0.75);
  EXPECT_EQ(c.perf_log, fs::path("/var/lib/gpu-run/perf.jsonl"));
  EXPECT_DOUBLE_EQ(c.guard.min_free_fraction, 0.1);
  EXPECT_DOUBLE_EQ(c.guard.step_fraction, 1.0);
  EXPECT_EQ(c.source, p);
}

TEST(Config, UnknownGuardKeyNamed) {
  EXPECT_CONTAINS(error_of([] { parse_config(R"({"guard": {"step": 0.5}})", "c.json"); }), "key 'guard.step'");
}

TEST(Config, OtherAllowedValues) {
  Config c = parse_config(R"({"default_profile": null, "gpu_request": "cdi", "log_level": "error",
                              "on_error": "warn", "memory_fraction_max": 1, "profile_dirs": []})",
                          "c.json");
  EXPECT_FALSE(c.default_profile.has_value());
  EXPECT_EQ(c.gpu_request, "cdi");
  EXPECT_EQ(c.log_level, "error");
  EXPECT_DOUBLE_EQ(c.memory_fraction_max, 1.0);
  EXPECT_TRUE(c.profile_dirs.empty());
}

TEST(Config, UnknownKeyNamesFileAndKey) {
  std::string m =
      error_of([] { parse_config(R"({"engine": "docker", "enigne": "podman"})", "/etc/gpu-run/config.json"); });
  EXPECT_EQ(m.rfind("/etc/gpu-run/config.json: key 'enigne': unknown key", 0), 0u) << m;
  EXPECT_CONTAINS(m, "engine");  // the list of known keys
}

TEST(Config, BadValuesNameFileAndKey) {
  struct Case {
    const char* text;
    const char* key;
  } cases[] = {
      {R"({"default_profile": "Bad Name"})", "default_profile"},
      {R"({"default_profile": 3})", "default_profile"},
      {R"({"default_profile": "../x"})", "default_profile"},
      {R"({"engine": "lxc"})", "engine"},
      {R"({"engine": 1})", "engine"},
      {R"({"gpu_request": "nvidia"})", "gpu_request"},
      {R"({"profile_dirs": "/opt/a"})", "profile_dirs"},
      {R"({"profile_dirs": ["relative/dir"]})", "profile_dirs"},
      {R"({"profile_dirs": [""]})", "profile_dirs"},
      {R"({"profile_dirs": [7]})", "profile_dirs"},
      {R"({"runtimes": []})", "runtimes"},
      {R"({"runtimes": "runc"})", "runtimes"},
      {R"({"runtimes": [1]})", "runtimes"},
      {R"({"runtimes": [""]})", "runtimes"},
      {R"({"hook_path": "gpu-run-hook"})", "hook_path"},
      {R"({"log_file": 5})", "log_file"},
      {R"({"perf_log": "perf.jsonl"})", "perf_log"},
      {R"({"log_level": "trace"})", "log_level"},
      {R"({"on_error": "ignore"})", "on_error"},
      {R"({"memory_fraction_max": 0})", "memory_fraction_max"},
      {R"({"memory_fraction_max": -0.5})", "memory_fraction_max"},
      {R"({"memory_fraction_max": 1.5})", "memory_fraction_max"},
      {R"({"memory_fraction_max": "0.5"})", "memory_fraction_max"},
      {R"({"memory_fraction_max": true})", "memory_fraction_max"},
      {R"({"guard": 0.5})", "guard"},
      {R"({"guard": {"min_free_fraction": 0}})", "guard.min_free_fraction"},
      {R"({"guard": {"step_fraction": 2}})", "guard.step_fraction"},
      {R"({"guard": {"step_fraction": "0.5"}})", "guard.step_fraction"},
  };
  for (const auto& c : cases) {
    std::string m = error_of([&] { parse_config(c.text, "/etc/gpu-run/config.json"); });
    EXPECT_EQ(m.rfind(std::string("/etc/gpu-run/config.json: key '") + c.key + "': expected", 0), 0u)
        << c.text << " -> " << m;
  }
  EXPECT_CONTAINS(error_of([] { parse_config(R"({"engine": "lxc"})", "c.json"); }), "docker|podman");
  EXPECT_CONTAINS(error_of([] { parse_config(R"({"engine": "lxc"})", "c.json"); }), "\"lxc\"");
}

TEST(Config, MalformedJson) {
  TempDir d;
  fs::path p = d.write("config.json", "{\n  \"engine\": \"docker\"\n  \"log_level\": \"info\"\n}\n");
  std::string m = error_of([&] { load_config(p); });
  EXPECT_EQ(m.rfind(p.string() + ": malformed JSON", 0), 0u) << m;
  EXPECT_CONTAINS(m, "line 3");  // nlohmann reports where it stopped
  EXPECT_CONTAINS(m, "remove it to use the defaults");
}

TEST(Config, EmptyFileIsMalformedNotDefaults) {
  TempDir d;
  fs::path p = d.write("config.json", "");
  EXPECT_CONTAINS(error_of([&] { load_config(p); }), "malformed JSON");
}

TEST(Config, TopLevelMustBeAnObject) {
  EXPECT_CONTAINS(error_of([] { parse_config("[]", "c.json"); }), "c.json: expected a JSON object");
  EXPECT_CONTAINS(error_of([] { parse_config("null", "c.json"); }), "c.json: expected a JSON object");
}

TEST(Config, DirectoryIsAnError) {
  TempDir d;
  fs::create_directories(d / "config.json");
  std::string m = error_of([&] { load_config(d / "config.json"); });
  EXPECT_CONTAINS(m, (d / "config.json").string());
  EXPECT_CONTAINS(m, "is a directory");
}

TEST(Config, EffectiveGpuRequest) {
  Config c;
  EXPECT_EQ(effective_gpu_request(c, "docker"), "docker");
  EXPECT_EQ(effective_gpu_request(c, "podman"), "cdi");
  c.gpu_request = "none";
  EXPECT_EQ(effective_gpu_request(c, "docker"), "none");
  EXPECT_EQ(effective_gpu_request(c, "podman"), "none");
  c.gpu_request = "cdi";
  EXPECT_EQ(effective_gpu_request(c, "docker"), "cdi");
}

// Restores an environment variable when it leaves scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Config, ConfigPathPrecedence) {
  {
    ScopedEnv env("GPU_RUN_CONFIG", "/from/env.json");
    EXPECT_EQ(config_path(fs::path("/explicit.json")), fs::path("/explicit.json"));
    EXPECT_EQ(config_path(std::nullopt), fs::path("/from/env.json"));
    EXPECT_EQ(config_path(fs::path()), fs::path("/from/env.json"));  // an empty --config is no --config
  }
  {
    ScopedEnv env("GPU_RUN_CONFIG", nullptr);
    EXPECT_EQ(config_path(std::nullopt), fs::path("/etc/gpu-run/config.json"));
  }
  {
    ScopedEnv env("GPU_RUN_CONFIG", "");
    EXPECT_EQ(config_path(std::nullopt), fs::path("/etc/gpu-run/config.json"));
  }
}

}  // namespace
}  // namespace gpurun

namespace gpurun {
namespace {

TEST(ConfigFuzzRegression, OutOfRangeNumberIsAnError) {
  EXPECT_THROW(parse_config(R"({"memory_fraction_max":1e999})", "c.json"), Error);
}

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
  EXPECT_EQ(c.on_error, OnError::kWarn);
  EXPECT_DOUBLE_EQ(c.memory_fraction_max, 0.5);
}

}  // namespace
}  // namespace gpurun
