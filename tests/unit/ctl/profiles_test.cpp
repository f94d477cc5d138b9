#include "ctl/profiles/profiles.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using test::TempDir;

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
  const json listing = list_profiles(store, store);
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

// Issue 40: `profiles list` listed a profile in the user's directory that the runtime, the hook
// and the node guard (no HOME) never find; it now says which doors see each profile.
TEST(ProfilesList, SaysWhichDoorsSeeEachProfile) {
  TempDir dir;
  dir.write("home/myteam/bert.json", R"({"batch_size": 8})");
  dir.write("home/imagenet.json", R"({"batch_size": 8})");
  dir.write("etc/shared.json", R"({"batch_size": 8})");
  const ProfileStore person({dir.path() / "home", dir.path() / "etc", GPU_RUN_SOURCE_PROFILES});
  const ProfileStore host_doors({dir.path() / "etc", GPU_RUN_SOURCE_PROFILES});
  const json listing = list_profiles(person, host_doors);
  std::map<std::string, json> by_name;
  for (const auto& p : listing["profiles"]) by_name[p["name"]] = p;
  EXPECT_EQ(by_name["myteam/bert"]["doors"], "gpu-run and gpu-run-ctl only");
  EXPECT_FALSE(by_name["myteam/bert"].contains("host_doors_path"));
  EXPECT_EQ(by_name["shared"]["doors"], "every door");
  EXPECT_EQ(by_name["default"]["doors"], "every door");
  // Shadowing a built-in: the host's doors use the built-in instead.
  EXPECT_EQ(by_name["imagenet"]["doors"], "gpu-run and gpu-run-ctl only");
  EXPECT_EQ(by_name["imagenet"]["host_doors_path"], (fs::path(GPU_RUN_SOURCE_PROFILES) / "imagenet.json").string());
  // The one line `profiles new` prints, with the command that puts it where every door looks.
  const std::string note = profile_reach_note("myteam/bert", dir.path() / "home/myteam/bert.json", host_doors);
  EXPECT_CONTAINS(note, "gpu-run-runtime, gpu-run-hook and the node guard");
  EXPECT_CONTAINS(note, "sudo install -D -m 0644 " + (dir.path() / "home/myteam/bert.json").string() + " " +
                            kSystemProfileDir + "/myteam/bert.json");
  EXPECT_EQ(note.find('\n'), std::string::npos);
  EXPECT_EQ(profile_reach_note("shared", dir.path() / "etc/shared.json", host_doors), "");
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

TEST(ProfilesShow, PrintsAShapeOnOneLine) {
  const json profile = show_profile(ProfileStore({GPU_RUN_SOURCE_PROFILES}), "imagenet")["profile"];
  const std::string text = profile_text(profile);
  EXPECT_CONTAINS(text, "\"shape\": [3, 224, 224]\n");
  EXPECT_CONTAINS(text, "\"shape\": []\n");
  EXPECT_CONTAINS(text, "  \"fields\": [\n    {\n      \"dtype\": \"float32\",\n");
  // The same document: only the layout differs from dump(2).
  EXPECT_EQ(json::parse(text), profile);
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace gpurun
