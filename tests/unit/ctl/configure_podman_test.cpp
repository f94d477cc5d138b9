#include "ctl/configure/configure_podman.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "base/error.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using test::read_text;

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

TEST(HooksDUndo, RemovesGpuRunsHookOrPutsBackTheFileItReplaced) {
  const std::string ours = hooks_d_document("/usr/bin/gpu-run-hook", "/etc/gpu-run/config.json", false).dump(2);
  EXPECT_EQ(undo_hook_file(ours, std::nullopt, "gpu-run.json").kind, UndoEdit::kRemove);
  const std::string theirs = "{\"version\": \"1.0.0\", \"hook\": {\"path\": \"/opt/other-hook\"}}\n";
  const UndoEdit back = undo_hook_file(ours, theirs, "gpu-run.json");
  EXPECT_EQ(back.kind, UndoEdit::kRestore);
  EXPECT_EQ(back.text, theirs);
  // A backup that is gpu-run's own hook too: nothing else to put back.
  EXPECT_EQ(undo_hook_file(ours, ours, "gpu-run.json").kind, UndoEdit::kRemove);
  EXPECT_EQ(undo_hook_file(std::nullopt, std::nullopt, "gpu-run.json").kind, UndoEdit::kNothing);
  // The first configure takes a backup of another file only.
  EXPECT_TRUE(hook_file_edit(theirs, "f", json::parse(ours)).first);
  EXPECT_FALSE(hook_file_edit(ours, "f", json::parse(ours)).first);
}

TEST(HooksDUndo, AFileThatIsNotGpuRunsHookIsRefused) {
  for (const char* text : {"{\"version\": \"1.0.0\", \"hook\": {\"path\": \"/opt/other-hook\"}}", "{\"version\":"}) {
    const Error e = expect_error([&] { undo_hook_file(std::string(text), std::nullopt, "/h/gpu-run.json"); });
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_CONTAINS(e.what(), "/h/gpu-run.json is not gpu-run's hook");
    EXPECT_CONTAINS(e.what(), "leaves it as it is");
  }
}

TEST(Packaging, HooksFileIsWhatConfigurePodmanWrites) {
  const json shipped = json::parse(read_text(std::string(GPU_RUN_SOURCE_PACKAGING) + "/hooks.d/gpu-run.json"));
  EXPECT_EQ(shipped, json::parse(hooks_d_document("/usr/bin/gpu-run-hook", kDefaultConfigPath, false).dump()));
}

}  // namespace
}  // namespace gpurun
