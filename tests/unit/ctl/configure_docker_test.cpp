#include "configure_docker.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error.hpp"
#include "test_files.hpp"
#include "test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using test::read_text;

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

TEST(Packaging, DaemonJsonSnippetIsWhatConfigureDockerWrites) {
  const json shipped = json::parse(read_text(std::string(GPU_RUN_SOURCE_PACKAGING) + "/daemon.json"));
  EXPECT_EQ(shipped, json::parse(merge_daemon_json(std::nullopt, "d.json", kRuntime, false).text));
}

}  // namespace
}  // namespace gpurun
