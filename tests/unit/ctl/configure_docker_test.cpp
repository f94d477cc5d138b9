#include "ctl/configure/configure_docker.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "oci/runtime_chain.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

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

// nvidia-ctk runtime configure --runtime=docker --set-as-default writes this.
constexpr const char* kNvidiaDefault =
    R"({"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}})";

TEST(DockerDefaultRuntime, FindsTheDefaultRuntimeAndItsPath) {
  const DefaultRuntime nvidia = docker_default_runtime(std::string(kNvidiaDefault), "d.json");
  EXPECT_EQ(nvidia.name, "nvidia");
  EXPECT_EQ(nvidia.binary, "nvidia-container-runtime");
  EXPECT_FALSE(nvidia.is_entry);
  EXPECT_CONTAINS(nvidia.where, "dockerd's default runtime \"nvidia\" (runtimes.nvidia.path)");
  // runc, dockerd's own: nothing to chain but the gpu-run config's runtimes.
  for (const std::optional<std::string>& text :
       {std::optional<std::string>(), std::optional<std::string>(R"({"runtimes": {"nvidia": {"path": "/x"}}})"),
        std::optional<std::string>(R"({"default-runtime": "runc"})")}) {
    const DefaultRuntime runc = docker_default_runtime(text, "d.json");
    EXPECT_EQ(runc.name, "runc");
    EXPECT_EQ(runc.binary, "");
  }
  // gpu-run is the default already: what its entry runs stays.
  const DefaultRuntime ours = docker_default_runtime(
      std::string(
          R"({"default-runtime": "gpu-run", "runtimes": {"gpu-run": {"path": "/etc/docker/gpu-run-runtime.gpu-run"}}})"),
      "d.json");
  EXPECT_TRUE(ours.is_entry);
  EXPECT_EQ(ours.binary, "/etc/docker/gpu-run-runtime.gpu-run");
}

TEST(DockerDefaultRuntime, ADefaultThatCannotBeChainedIsRefusedInOneLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (
      const Case& c :
      {Case{R"({"default-runtime": "nvidia"})", "default-runtime is \"nvidia\" but runtimes.nvidia is not an object"},
       Case{R"({"default-runtime": "gvisor", "runtimes": {"gvisor": {"runtimeType": "io.containerd.runsc.v1"}}})",
            "the default runtime \"gvisor\" has no path (it is the shim \"io.containerd.runsc.v1\")"},
       Case{
           R"({"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/usr/bin/x", "runtimeArgs": ["--debug"]}}})",
           "has runtimeArgs [\"--debug\"]"},
       Case{R"({"default-runtime": 3})", "key 'default-runtime': expected a runtime name"},
       Case{R"({"default-runtime": "gpu-run"})", "default-runtime is \"gpu-run\" but runtimes.gpu-run"}}) {
    const Error e = expect_error([&] { docker_default_runtime(std::string(c.text), "/etc/docker/daemon.json"); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << c.text;
    EXPECT_CONTAINS(e.what(), "/etc/docker/daemon.json: ");
    EXPECT_CONTAINS(e.what(), c.says);
    EXPECT_CONTAINS(e.what(), "leaves");
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(DockerDefaultRuntime, ChainsAnExistingBinaryAndRefusesAMissingOneOrALoop) {
  test::TempDir d;
  d.write("nvidia-container-runtime", "#!/bin/sh\nexec runc \"$@\"\n");
  fs::permissions(d / "nvidia-container-runtime", fs::perms::owner_all);
  const std::string nvidia = (d / "nvidia-container-runtime").string();
  DefaultRuntime def{"nvidia", nvidia, "dockerd's default runtime \"nvidia\" (runtimes.nvidia.path)", false};
  const Chain chain = resolve_chain(def, "d.json", kRuntime);
  ASSERT_TRUE(chain.next);
  EXPECT_EQ(*chain.next, nvidia);
  EXPECT_EQ(chain_words(chain), "gpu-run-runtime -> nvidia-container-runtime (" + nvidia +
                                    ", dockerd's default runtime \"nvidia\" (runtimes.nvidia.path))");

  def.binary = (d / "missing").string();
  EXPECT_CONTAINS(expect_error([&] { resolve_chain(def, "d.json", kRuntime); }).what(),
                  "is " + def.binary + ", which is not an executable file: containers cannot run under it either");
  def.binary = "no-such-runtime-on-path";
  EXPECT_CONTAINS(expect_error([&] { resolve_chain(def, "d.json", kRuntime); }).what(),
                  "not an executable file on PATH");

  // The default runs gpu-run-runtime: a chain file, or the binary itself.
  d.write("gpu-run-runtime.other", runtime_chain_text({kRuntime, nvidia}, {}));
  fs::permissions(d / "gpu-run-runtime.other", fs::perms::owner_all);
  for (const fs::path& loop : {d / "gpu-run-runtime.other", fs::path("/proc/self/exe")}) {
    def.binary = loop.string();
    const Error e = expect_error([&] { resolve_chain(def, "d.json", loop == "/proc/self/exe" ? loop : kRuntime); });
    EXPECT_CONTAINS(e.what(), "gpu-run-runtime itself: chaining it would loop");
  }
  // Built-in runc: the config's runtimes.
  EXPECT_FALSE(resolve_chain(DefaultRuntime{"runc", "", "dockerd's built-in runc", false}, "d.json", kRuntime).next);
}

TEST(DaemonJson, TheEntryRunsTheChainFileAndSetDefaultSaysWhatItChains) {
  const FileEdit edit =
      merge_daemon_json(std::string(kNvidiaDefault), "d.json", "/etc/docker/gpu-run-runtime.gpu-run", true);
  const json out = json::parse(edit.text);
  EXPECT_EQ(out["runtimes"]["gpu-run"]["path"], "/etc/docker/gpu-run-runtime.gpu-run");
  EXPECT_EQ(out["runtimes"]["nvidia"], json::parse(kNvidiaDefault)["runtimes"]["nvidia"]);
  EXPECT_EQ(out["default-runtime"], "gpu-run");
  EXPECT_TRUE(edit.first);
  ASSERT_FALSE(edit.notes.empty());
  EXPECT_CONTAINS(edit.notes.front(), "default-runtime was \"nvidia\", now \"gpu-run\", which execs \"nvidia\"");
  EXPECT_FALSE(merge_daemon_json(edit.text, "d.json", "/etc/docker/gpu-run-runtime.gpu-run", true).first);
}

TEST(DaemonJsonUndo, GivesBackTheBackupByteForByte) {
  // The backup's own layout (not what nlohmann writes), with and without --set-default.
  const std::string before =
      "{\n    \"default-runtime\": \"nvidia\",\n    \"runtimes\": {\n        \"nvidia\": {\n"
      "            \"args\": [],\n            \"path\": \"nvidia-container-runtime\"\n        }\n    }\n}";
  for (bool set_default : {false, true}) {
    const FileEdit edit = merge_daemon_json(before, "d.json", "/etc/docker/gpu-run-runtime.gpu-run", set_default);
    const UndoEdit undo = undo_daemon_json(edit.text, before, "d.json");
    EXPECT_EQ(undo.kind, UndoEdit::kRestore);
    EXPECT_EQ(undo.text, before);
    EXPECT_EQ(undo.entry_binary, "/etc/docker/gpu-run-runtime.gpu-run");
    EXPECT_CONTAINS(undo.said, "restored from d.json.gpu-run.bak, byte for byte");
  }
}

TEST(DaemonJsonUndo, AFileConfigureCreatedIsRemovedAndAFileWithoutTheEntryIsLeft) {
  const FileEdit created = merge_daemon_json(std::nullopt, "d.json", kRuntime, true);
  EXPECT_EQ(undo_daemon_json(created.text, std::nullopt, "d.json").kind, UndoEdit::kRemove);
  EXPECT_EQ(undo_daemon_json(std::string(kNvidiaDefault), std::nullopt, "d.json").kind, UndoEdit::kNothing);
  EXPECT_EQ(undo_daemon_json(std::nullopt, std::nullopt, "d.json").kind, UndoEdit::kNothing);
}

TEST(DaemonJsonUndo, AFileChangedOtherwiseIsRefusedNamingTheChange) {
  const std::string before = kNvidiaDefault;
  const FileEdit edit = merge_daemon_json(before, "d.json", kRuntime, false);
  json edited = json::parse(edit.text);
  edited["log-level"] = "debug";
  Error e = expect_error([&] { undo_daemon_json(edited.dump(), before, "/etc/docker/daemon.json"); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(),
                  "/etc/docker/daemon.json changed since gpu-run-ctl configure wrote it (key 'log-level' added)");
  EXPECT_CONTAINS(e.what(), "remove runtimes.gpu-run by hand, or copy /etc/docker/daemon.json.gpu-run.bak over it");
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);

  edited = json::parse(edit.text);
  edited["runtimes"]["nvidia"]["path"] = "/usr/local/bin/nvidia-container-runtime";
  e = expect_error([&] { undo_daemon_json(edited.dump(), before, "d.json"); });
  EXPECT_CONTAINS(e.what(), "key 'runtimes.nvidia.path' changed");
  // No backup, and more than configure wrote: nothing to restore.
  e = expect_error([&] {
    undo_daemon_json(std::string(R"({"debug": true, "runtimes": {"gpu-run": {"path": "/x"}}})"), std::nullopt,
                     "d.json");
  });
  EXPECT_CONTAINS(e.what(), "d.json: no backup d.json.gpu-run.bak to restore");
}

TEST(Packaging, DaemonJsonSnippetIsWhatConfigureDockerWrites) {
  const json shipped = json::parse(read_text(std::string(GPU_RUN_SOURCE_PACKAGING) + "/daemon.json"));
  EXPECT_EQ(shipped, json::parse(merge_daemon_json(std::nullopt, "d.json", kRuntime, false).text));
}

TEST(ConfigureDockerTest, ReloadSignalsOnlyTheDockerdOfTheFile) {
  // `kill -HUP $(pidof dockerd)` signals every dockerd of a host that runs several.
  const std::string system = dockerd_reload_hint("/etc/docker/daemon.json", std::nullopt);
  EXPECT_CONTAINS(system, "systemctl reload docker");
  EXPECT_CONTAINS(system, "kill -HUP \"$(cat /var/run/docker.pid)\"");
  EXPECT_NOT_CONTAINS(system, "pidof");
  EXPECT_CONTAINS(dockerd_reload_hint("/etc/docker/daemon.json", std::string(R"({"pidfile": "/run/d 2.pid"})")),
                  "kill -HUP \"$(cat '/run/d 2.pid')\"");
  const std::string other = dockerd_reload_hint("/srv/d2/daemon.json", std::string(R"({"runtimes": {}})"));
  EXPECT_NOT_CONTAINS(other, "systemctl");
  EXPECT_NOT_CONTAINS(other, "pidof");
  EXPECT_CONTAINS(other, "the dockerd started with --config-file /srv/d2/daemon.json");
  EXPECT_CONTAINS(dockerd_reload_hint("/srv/d2/daemon.json", std::string(R"({"pidfile": "/srv/d2/docker.pid"})")),
                  "send it SIGHUP: `kill -HUP \"$(cat /srv/d2/docker.pid)\"`");
  EXPECT_CONTAINS(dockerd_reload_hint("/srv/d2/daemon.json", std::string("{not json")), "--config-file");
}

}  // namespace
}  // namespace gpurun
