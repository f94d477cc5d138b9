#pragma once

// `gpu-run-ctl k8s profiles-configmap`: only the ConfigMap gpu-run-profiles of a directory of
// teams' profiles, the object `k8s webhook-manifests --profiles DIR` or `k8s guard-manifests
// --profiles DIR` prints for the same DIR (packaging/team-profile-package --config-map prints it
// for one team's profiles). docs/kubernetes.md, "Teams' profiles".

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ctl/k8s/profiles_config_map.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// The server whose manifests mount the ConfigMap: its namespace and its labels are the ConfigMap's.
enum class ProfilesServer { kWebhook, kGuard };

struct ProfilesConfigMapOptions {
  std::string profiles_dir;                          // --profiles DIR
  ProfilesServer server = ProfilesServer::kWebhook;  // --server webhook|guard
  std::optional<std::string> namespace_name;         // --namespace; default the server's manifests'
  std::vector<std::string> labels;                   // --label KEY=VALUE, as the manifests were given
};

// --server's word: "webhook" or "guard". Throws Error (exit 2) naming --server otherwise.
ProfilesServer parse_profiles_server(const std::string& word);

// The ConfigMap of `tree` taken from the server's own manifests (webhook_manifests or
// guard_manifests with the same namespace and labels), so the two cannot differ. Pure. Throws
// Error (exit 2) as those do on a bad --namespace or --label, and as profiles_config_map on a tree
// one ConfigMap cannot hold.
nlohmann::ordered_json profiles_config_map_of(const ProfilesConfigMapOptions& options, const ProfileTree& tree);

// That ConfigMap as a YAML stream of one document, after a header that says what mounts it. Pure.
std::string render_profiles_config_map(const ProfilesConfigMapOptions& options, const ProfileTree& tree);

// Checks the options, reads --profiles (read_profile_tree, the built-ins beside this gpu-run-ctl)
// and prints the ConfigMap; nothing is printed when a profile is refused.
void run_profiles_config_map(const ProfilesConfigMapOptions& options);

// Registers `profiles-configmap` under the `k8s` command.
void add_k8s_profiles_config_map_command(CLI::App& k8s);

}  // namespace gpurun
