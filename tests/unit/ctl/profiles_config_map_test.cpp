#include "ctl/k8s/profiles_config_map.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/k8s/k8s.hpp"
#include "ctl/k8s/k8s_guard.hpp"
#include "ctl/k8s/k8s_webhook.hpp"
#include "decision/config.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using test::TempDir;

// A team's profile as `profiles new vision/resnet50` writes it, and a flat one.
constexpr const char* kResnet = R"({"name": "vision/resnet50", "fields": [{"name": "x", "shape": [3, 224, 224],
  "dtype": "float32"}], "batch_size": 64, "workers_per_gpu": 4})";
constexpr const char* kBert = R"({"name": "bert", "fields": [{"name": "ids", "shape": [512], "dtype": "int64"}],
  "batch_size": 32, "workers_per_gpu": 2})";

const ordered_json& find_kind(const std::vector<ordered_json>& objects, const std::string& kind,
                              const std::string& name) {
  for (const ordered_json& o : objects)
    if (o["kind"] == kind && o["metadata"]["name"] == name) return o;
  static const ordered_json none;
  ADD_FAILURE() << "no " << kind << " " << name;
  return none;
}

const ordered_json& profiles_volume_of(const ordered_json& workload) {
  for (const ordered_json& v : workload["spec"]["template"]["spec"]["volumes"])
    if (v["name"] == "profiles") return v;
  static const ordered_json none;
  ADD_FAILURE() << "no profiles volume";
  return none;
}

// What the kubelet writes for a ConfigMap volume: each item's path gets its key's data.
std::map<std::string, std::string> payload_of(const ordered_json& config_map, const ordered_json& volume) {
  std::map<std::string, std::string> payload;
  for (const ordered_json& item : volume["configMap"]["items"])
    payload[item["path"].get<std::string>()] = config_map["data"][item["key"].get<std::string>()].get<std::string>();
  return payload;
}

// The pod of a team's job, sized by `k8s -f`.
const std::string kPod = R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train",
  "annotations": {"gpu-run.profile": "vision/resnet50"}}, "spec": {"containers": [{"name": "t", "image": "i",
  "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "8"}}}]}})";

// Issue 40: `kubectl create configmap --from-file=profiles/` skips the team's directory (a
// ConfigMap with no data), and flattening it names the profile resnet50, which `vision/resnet50`
// does not find. --profiles ships the tree as keys plus items with paths; the kubelet's atomic
// writer gives the tree back (`vision -> ..data/vision`), and `k8s -f --profile-dir` and the
// webhook read it as the flat layout.
TEST(ProfilesConfigMapTest, ATeamTreeSurvivesTheTripThroughTheKubeletsVolume) {
  TempDir src;
  src.write("vision/resnet50.json", kResnet);
  src.write("bert.json", kBert);
  const fs::path builtins = builtin_profile_dir(test::builtin_only_env);
  const ProfileTree tree = read_profile_tree(src.path(), builtins);
  ASSERT_EQ(tree.size(), 2u);

  WebhookManifestOptions wo;
  wo.cert_manager = true;
  GuardManifestOptions go;
  const std::vector<std::pair<std::vector<ordered_json>, const char*>> doors = {
      {webhook_manifests(wo, std::nullopt, kDefaultWebhookConfig, &tree), "Deployment"},
      {guard_manifests(go, &tree), "DaemonSet"}};
  for (const auto& [objects, workload] : doors) {
    const ordered_json& config_map = find_kind(objects, "ConfigMap", kProfilesConfigMap);
    EXPECT_EQ(config_map["data"]["vision__resnet50.json"], kResnet);
    EXPECT_EQ(config_map["data"]["bert.json"], kBert);
    for (const auto& [key, value] : config_map["data"].items()) EXPECT_EQ(key.find('/'), std::string::npos) << key;
    const std::string server = std::string(workload) == "Deployment" ? "gpu-run-webhook" : "gpu-run-guard";
    const ordered_json& volume = profiles_volume_of(find_kind(objects, workload, server));
    EXPECT_EQ(volume["configMap"]["name"], kProfilesConfigMap);
    EXPECT_EQ(volume["configMap"]["optional"], true);

    // The kubelet's volume from that ConfigMap and those items.
    TempDir mounted;
    const fs::path volume_dir = mounted.path() / "profiles";
    test::write_config_map_volume(volume_dir, payload_of(config_map, volume));
    ASSERT_TRUE(fs::is_symlink(volume_dir / "vision"));
    EXPECT_EQ(test::read_text(volume_dir / "vision/resnet50.json"), kResnet);

    // k8s -f --profile-dir: the team's name finds its profile.
    const ProfileStore store = ctl_store({volume_dir.string()}, Config{}, test::builtin_only_env);
    const K8sResult r = render_k8s(kPod, "p.json", WebhookConfig{}, store, nullptr);
    EXPECT_CONTAINS(r.manifest, "GPU_RUN_SHM_SIZE");
    EXPECT_CONTAINS(r.manifest, "vision/resnet50");
    EXPECT_EQ(store.load("bert", false).name, "bert");
  }
}

TEST(ProfilesConfigMapTest, WithoutProfilesTheVolumeStaysOptionalAndFlat) {
  const ordered_json v = profiles_volume(nullptr);
  EXPECT_EQ(v["configMap"]["name"], kProfilesConfigMap);
  EXPECT_FALSE(v["configMap"].contains("items"));
  GuardManifestOptions go;
  for (const ordered_json& o : guard_manifests(go))
    EXPECT_FALSE(o["kind"] == "ConfigMap" && o["metadata"]["name"] == kProfilesConfigMap);
}

TEST(ProfilesConfigMapTest, RefusesWhatTheClusterCouldNotUseInOneLine) {
  const fs::path builtins = builtin_profile_dir(test::builtin_only_env);
  TempDir empty;
  EXPECT_CONTAINS(expect_error([&] { read_profile_tree(empty.path(), builtins); }).what(), "no profile in it");
  EXPECT_CONTAINS(expect_error([&] { read_profile_tree(empty.path() / "nope", builtins); }).what(), "not a directory");
  TempDir bad_name;
  bad_name.write("Vision/resnet50.json", kResnet);
  Error e = expect_error([&] { read_profile_tree(bad_name.path(), builtins); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "'Vision/resnet50' is not a profile name");
  TempDir deep;
  deep.write("a/b/c.json", kBert);
  EXPECT_CONTAINS(expect_error([&] { read_profile_tree(deep.path(), builtins); }).what(), "below a team's");
  TempDir broken;
  broken.write("vision/resnet50.json", R"({"name": "vision/resnet50", "extends": "missing"})");
  EXPECT_CONTAINS(expect_error([&] { read_profile_tree(broken.path(), builtins); }).what(),
                  "unknown parent profile 'missing'");
  // Two paths that would be one key.
  const ProfileTree clash = {{"a/b.json", "{}"}, {"a__b.json", "{}"}};
  EXPECT_CONTAINS(expect_error([&] { profiles_config_map(clash, "ns", "app"); }).what(),
                  "would both be the ConfigMap key a__b.json");
  const ProfileTree huge = {{"big.json", std::string(kMaxConfigMapBytes + 1, ' ')}};
  EXPECT_CONTAINS(expect_error([&] { profiles_config_map(huge, "ns", "app"); }).what(), "more than a ConfigMap holds");
}

}  // namespace
}  // namespace gpurun
