#include "ctl/k8s/k8s_profiles.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/k8s/k8s_guard.hpp"
#include "ctl/k8s/k8s_webhook.hpp"
#include "ctl/k8s/manifest.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

const char* manifests_command(ProfilesServer server) {
  return server == ProfilesServer::kWebhook ? "webhook-manifests" : "guard-manifests";
}

// The server's manifests with `tree` (or none), under the namespace and labels given.
std::vector<ordered_json> server_manifests(const ProfilesConfigMapOptions& o, const ProfileTree* tree) {
  if (o.server == ProfilesServer::kWebhook) {
    WebhookManifestOptions w;
    if (o.namespace_name) w.namespace_name = *o.namespace_name;
    w.labels = o.labels;
    return webhook_manifests(w, std::nullopt, kDefaultWebhookConfig, tree);
  }
  GuardManifestOptions g;
  if (o.namespace_name) g.namespace_name = *o.namespace_name;
  g.labels = o.labels;
  return guard_manifests(g, tree);
}

const ordered_json& profiles_config_map_in(const std::vector<ordered_json>& objects, ProfilesServer server) {
  for (const ordered_json& object : objects)
    if (object["kind"] == "ConfigMap" && object["metadata"]["name"] == kProfilesConfigMap) return object;
  throw Error(std::string("k8s profiles-configmap: the ") + manifests_command(server) + " hold no ConfigMap " +
              kProfilesConfigMap);
}

// "the Deployment gpu-run-webhook mounts it at /profiles": the workload that mounts the volume.
std::string mounted_by(const std::vector<ordered_json>& objects) {
  for (const ordered_json& object : objects) {
    if (!object.contains("spec") || !object["spec"].contains("template")) continue;
    for (const ordered_json& container : object["spec"]["template"]["spec"]["containers"])
      for (const ordered_json& mount : container.value("volumeMounts", ordered_json::array()))
        if (mount["name"] == "profiles")
          return "the " + object["kind"].get<std::string>() + " " + object["metadata"]["name"].get<std::string>() +
                 " mounts it at " + mount["mountPath"].get<std::string>();
  }
  return "no workload mounts it";
}

}  // namespace

ProfilesServer parse_profiles_server(const std::string& word) {
  if (word == "webhook") return ProfilesServer::kWebhook;
  if (word == "guard") return ProfilesServer::kGuard;
  throw usage_error("--server '" + k8s_shown(word) +
                    "': expected webhook or guard (whose manifests mount the ConfigMap: k8s webhook-manifests or k8s "
                    "guard-manifests)");
}

ordered_json profiles_config_map_of(const ProfilesConfigMapOptions& o, const ProfileTree& tree) {
  return profiles_config_map_in(server_manifests(o, &tree), o.server);
}

std::string render_profiles_config_map(const ProfilesConfigMapOptions& o, const ProfileTree& tree) {
  const std::vector<ordered_json> objects = server_manifests(o, &tree);
  const ordered_json& config_map = profiles_config_map_in(objects, o.server);
  const std::string ns = config_map["metadata"]["namespace"].get<std::string>();
  const std::string command = manifests_command(o.server);
  const std::string header =
      "# The teams' profiles (gpu-run-ctl k8s profiles-configmap, " + std::to_string(tree.size()) +
      (tree.size() == 1 ? " file" : " files") + "): the ConfigMap\n# " + kProfilesConfigMap + " in namespace " + ns +
      " as `gpu-run-ctl k8s " + command + " --profiles DIR` prints it;\n# " + mounted_by(objects) +
      ".\n"
      "# It replaces the whole ConfigMap: every team's profiles go in the one DIR (DIR/TEAM/NAME.json).\n"
      "# A pod mounts the paths its manifests list: a changed profile needs only this; a new or renamed\n"
      "# one needs the manifests printed again with --profiles DIR (k8s " +
      command + ").\n";
  return render_manifest_stream(header, {config_map});
}

void run_profiles_config_map(const ProfilesConfigMapOptions& o) {
  if (o.profiles_dir.empty())
    throw usage_error(
        "k8s profiles-configmap: give the directory of the teams' profiles: --profiles DIR (NAME.json, "
        "TEAM/NAME.json)");
  server_manifests(o, nullptr);  // the options, before any profile is read
  const ProfileTree tree = read_profile_tree(o.profiles_dir, builtin_profile_dir());
  std::cout << render_profiles_config_map(o, tree);
}

void add_k8s_profiles_config_map_command(CLI::App& k8s) {
  auto o = std::make_shared<ProfilesConfigMapOptions>();
  auto server = std::make_shared<std::string>("webhook");
  CLI::App* cmd = k8s.add_subcommand(
      "profiles-configmap",
      "Print only the ConfigMap gpu-run-profiles of a directory of teams' profiles, as webhook-manifests or "
      "guard-manifests --profiles DIR print it");
  cmd->add_option("--profiles", o->profiles_dir,
                  "The teams' profiles (NAME.json, TEAM/NAME.json), each checked first, as the manifests' --profiles")
      ->type_name("DIR");
  cmd->add_option("--server", *server,
                  "Whose manifests mount it: webhook (k8s webhook-manifests) or guard (k8s guard-manifests); "
                  "its namespace and labels are theirs")
      ->type_name("webhook|guard")
      ->capture_default_str();
  cmd->add_option(
         "--namespace", o->namespace_name,
         "The server's namespace, as given to its manifests (default: " + WebhookManifestOptions{}.namespace_name +
             " for the webhook, " + GuardManifestOptions{}.namespace_name + " for the guard)")
      ->type_name("NS");
  cmd->add_option("--label", o->labels, "A label, as given to the manifests' --label (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->footer(
      "The ConfigMap the manifests print with --profiles DIR, and only it: applying it and then the\n"
      "manifests, or the manifests alone, give the same object. A team's profiles only, checked as for\n"
      "its .deb: packaging/team-profile-package --config-map DIR TEAM.\n"
      "  gpu-run-ctl k8s profiles-configmap --profiles profiles/ | kubectl apply -f -");
  cmd->callback([o, server] {
    o->server = parse_profiles_server(*server);
    run_profiles_config_map(*o);
  });
}

}  // namespace gpurun
