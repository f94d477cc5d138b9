#include "ctl/k8s/profiles_config_map.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/k8s/k8s.hpp"
#include "ctl/k8s/k8s_guard.hpp"
#include "ctl/k8s/k8s_profiles.hpp"
#include "ctl/k8s/k8s_webhook.hpp"
#include "ctl/k8s/yaml.hpp"
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

// The one YAML document of `stream` that is the ConfigMap gpu-run-profiles, as its text.
std::string profiles_document(const std::string& stream) {
  std::string found;
  for (const YamlDocumentText& doc : split_yaml_documents(stream)) {
    const ordered_json value = yaml_document_value(doc.text, "stream", doc.line);
    if (value.is_object() && value["kind"] == "ConfigMap" && value["metadata"]["name"] == kProfilesConfigMap) {
      EXPECT_TRUE(found.empty()) << "two ConfigMaps " << kProfilesConfigMap;
      found = doc.text;
    }
  }
  EXPECT_FALSE(found.empty()) << "no ConfigMap " << kProfilesConfigMap << " in\n" << stream;
  return found;
}

// Issue 40: a team ships to a cluster the ConfigMap the manifests would print, without printing
// them. `k8s profiles-configmap --profiles DIR` prints the document webhook-manifests or
// guard-manifests --profiles DIR print, under the same namespace and labels, byte for byte; the
// kubelet's volume of it (the manifests' items) is read as vision/resnet50.
TEST(ProfilesConfigMapTest, ProfilesConfigmapPrintsTheManifestsOwnDocument) {
  TempDir src;
  src.write("vision/resnet50.json", kResnet);
  src.write("bert.json", kBert);
  const fs::path builtins = builtin_profile_dir(test::builtin_only_env);
  const ProfileTree tree = read_profile_tree(src.path(), builtins);

  struct Case {
    ProfilesServer server;
    std::optional<std::string> ns;
    std::vector<std::string> labels;
  };
  for (const Case& c : {Case{ProfilesServer::kWebhook, std::nullopt, {}},
                        Case{ProfilesServer::kWebhook, "ml-webhook", {"team=vision", "release=prom"}},
                        Case{ProfilesServer::kGuard, std::nullopt, {}},
                        Case{ProfilesServer::kGuard, "kube-system", {"release=prom"}}}) {
    SCOPED_TRACE(std::string(c.server == ProfilesServer::kWebhook ? "webhook" : "guard") + " " + c.ns.value_or("-"));
    ProfilesConfigMapOptions po;
    po.server = c.server;
    po.namespace_name = c.ns;
    po.labels = c.labels;
    const std::string printed = render_profiles_config_map(po, tree);
    std::size_t objects_printed = 0;
    for (const YamlDocumentText& doc : split_yaml_documents(printed))
      objects_printed += yaml_document_value(doc.text, "printed").is_null() ? 0 : 1;
    EXPECT_EQ(objects_printed, 1u) << printed;
    EXPECT_CONTAINS(printed, "# The teams' profiles (gpu-run-ctl k8s profiles-configmap, 2 files)");

    std::string manifests;
    std::vector<ordered_json> objects;
    if (c.server == ProfilesServer::kWebhook) {
      WebhookManifestOptions wo;
      wo.cert_manager = true;
      if (c.ns) wo.namespace_name = *c.ns;
      wo.labels = c.labels;
      manifests = render_webhook_manifests(wo, std::nullopt, kDefaultWebhookConfig, &tree);
      objects = webhook_manifests(wo, std::nullopt, kDefaultWebhookConfig, &tree);
      EXPECT_CONTAINS(printed, "the Deployment gpu-run-webhook mounts it at /profiles");
    } else {
      GuardManifestOptions go;
      if (c.ns) go.namespace_name = *c.ns;
      go.labels = c.labels;
      manifests = render_guard_manifests(go, &tree);
      objects = guard_manifests(go, &tree);
      EXPECT_CONTAINS(printed, "the DaemonSet gpu-run-guard mounts it at /etc/gpu-run/profiles.d");
    }
    // Applying it, then the manifests (or the manifests alone), leaves one object: the same text.
    EXPECT_EQ(profiles_document(printed), profiles_document(manifests));
    const ordered_json config_map = yaml_document_value(profiles_document(printed), "printed");
    EXPECT_EQ(config_map, find_kind(objects, "ConfigMap", kProfilesConfigMap));
    EXPECT_EQ(config_map["metadata"]["namespace"],
              c.ns.value_or(c.server == ProfilesServer::kWebhook ? "gpu-run" : "gpu-run-guard"));
    for (const std::string& label : c.labels) {
      const auto eq = label.find('=');
      EXPECT_EQ(config_map["metadata"]["labels"][label.substr(0, eq)], label.substr(eq + 1));
    }
    EXPECT_EQ(config_map, profiles_config_map_of(po, tree));

    // The kubelet's volume of the printed ConfigMap, through the items the manifests' pods list.
    const char* workload = c.server == ProfilesServer::kWebhook ? "Deployment" : "DaemonSet";
    const char* server = c.server == ProfilesServer::kWebhook ? "gpu-run-webhook" : "gpu-run-guard";
    const ordered_json& volume = profiles_volume_of(find_kind(objects, workload, server));
    TempDir mounted;
    const fs::path volume_dir = mounted.path() / "profiles";
    test::write_config_map_volume(volume_dir, payload_of(config_map, volume));
    const ProfileStore store({volume_dir, builtins});
    EXPECT_EQ(store.load("vision/resnet50", /*allow_path=*/false).name, "vision/resnet50");
    EXPECT_EQ(store.load("vision/resnet50", false).batch_size, 64u);
    EXPECT_EQ(store.load("bert", false).name, "bert");
  }
}

TEST(ProfilesConfigMapTest, ProfilesConfigmapRefusesBadFlagsInOneLine) {
  Error e = expect_error([] { parse_profiles_server("daemonset"); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--server 'daemonset': expected webhook or guard");
  const ProfileTree tree = {{"bert.json", kBert}};
  ProfilesConfigMapOptions po;
  po.namespace_name = "Not_A_Namespace";
  e = expect_error([&] { render_profiles_config_map(po, tree); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--namespace");
  po.namespace_name.reset();
  po.labels = {"app.kubernetes.io/name=other"};
  EXPECT_CONTAINS(expect_error([&] { render_profiles_config_map(po, tree); }).what(), "--label");
  // No --profiles: refused before anything is read or printed.
  testing::internal::CaptureStdout();
  EXPECT_CONTAINS(expect_error([] { run_profiles_config_map(ProfilesConfigMapOptions{}); }).what(), "--profiles DIR");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  // A profile whose "name" is not its path (what run_profiles_config_map reads it with).
  TempDir bad;
  std::string renamed = kResnet;
  renamed.replace(renamed.find("vision/resnet50"), 15, "vision/resnet");
  bad.write("vision/resnet50.json", renamed);
  e = expect_error([&] { read_profile_tree(bad.path(), builtin_profile_dir(test::builtin_only_env)); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "vision/resnet50.json: key 'name': 'vision/resnet' does not match the file's name");
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
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
