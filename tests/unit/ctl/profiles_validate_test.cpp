#include "ctl/profiles/profiles_validate.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

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
  dir.write("repo/vision/incomplete.json", R"({"extends": null, "batch_size": 2})");
  dir.write("repo/vision/minimal.json", R"({"batch_size": 2})");  // extends default
  dir.write("repo/Team/x.json", R"({"extends": "default"})");
  dir.write("repo/profile.schema.json", R"({"$schema": "not a profile"})");
  dir.write("repo/README.md", "not json");
  const std::vector<fs::path> builtin = {GPU_RUN_SOURCE_PROFILES};

  const ValidationReport report = validate_profiles({dir.path() / "repo"}, true, builtin);
  EXPECT_EQ(report.files.size(), 8u);
  EXPECT_EQ(report.valid.size(), 3u);  // vision/base, vision/resnet50, vision/minimal
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
  EXPECT_EQ(team.files.size(), 7u);
  EXPECT_EQ(team.valid.size(), 3u);
}

TEST(ProfilesValidate, EveryErrorOfAFileInOnePassNamedAsPlanNamesIt) {
  // Key errors, a name that is not the file's and an unknown parent: all four at once, and the
  // file is seg/b (its team's name, as plan and gpu-run call it), not b.
  TempDir dir;
  dir.write("repo/seg/b.json", R"({"name": "other", "extends": "nothing", "batch_size": 0, "typo": 1})");
  const ValidationReport report = validate_profiles({dir.path() / "repo"}, true, {GPU_RUN_SOURCE_PROFILES});
  std::string all;
  for (const auto& e : report.errors) all += e + "\n";
  EXPECT_EQ(report.errors.size(), 4u) << all;
  EXPECT_CONTAINS(all, "b.json: key 'batch_size'");
  EXPECT_CONTAINS(all, "b.json: key 'typo': unknown key");
  EXPECT_CONTAINS(all, "b.json: key 'name': 'other' does not match the file's name, which makes it 'seg/b'");
  EXPECT_CONTAINS(all, "b.json: key 'extends': unknown parent profile 'nothing'");
}

TEST(ProfilesValidate, MisspeltParentOffersTheBuiltIn) {
  TempDir dir;
  dir.write("repo/mine.json", R"({"extends": "imagenett"})");
  const ValidationReport report = validate_profiles({dir.path() / "repo"}, true, {GPU_RUN_SOURCE_PROFILES});
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_CONTAINS(report.errors[0],
                  "mine.json: key 'extends': unknown parent profile 'imagenett': did you mean imagenet");
}

TEST(ProfilesValidate, MissingExplicitPathIsAnErrorButNotOnTheSearchPath) {
  EXPECT_EQ(validate_profiles({"/nonexistent/gpu-run"}, true, {}).errors.size(), 1u);
  EXPECT_EQ(validation_summary(validate_profiles({"/nonexistent/gpu-run"}, true, {})),
            "1 error and no profile file to check (listed above)");
  EXPECT_TRUE(validate_profiles({"/nonexistent/gpu-run"}, false, {}).errors.empty());
  const ValidationReport builtin = validate_profiles({GPU_RUN_SOURCE_PROFILES}, true, {});
  EXPECT_TRUE(builtin.errors.empty());
  EXPECT_GE(builtin.files.size(), 8u);
}

}  // namespace
}  // namespace gpurun
