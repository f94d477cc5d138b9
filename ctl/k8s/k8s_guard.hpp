#pragma once

// `gpu-run-ctl k8s guard-manifests`: the Kubernetes objects that run the node guard
// (`gpu-run-ctl guard --engine containerd`) on every node, and what watches it: a Service, a
// ServiceMonitor, a PrometheusRule and a Grafana dashboard (packaging/kubernetes/gpu-run-guard.yaml
// is this command's output), and the ResourceQuota a critical priority class needs outside
// kube-system.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ctl/k8s/manifest.hpp"
#include "ctl/k8s/profiles_config_map.hpp"

namespace CLI {
class App;
}

namespace gpurun {

struct GuardManifestOptions {
  std::string namespace_name = "gpu-run-guard";
  std::string image;                                 // empty: kDefaultGuardImage
  std::string port = "9477";                         // the metrics port, 1 to 65535
  std::string containerd_state = "/run/containerd";  // the nodes' containerd state directory
  // --toleration KEY[=VALUE][:EFFECT] or all (every taint); none given: nvidia.com/gpu:NoSchedule.
  std::vector<std::string> tolerations;
  std::vector<std::string> node_selectors;      // --node-selector KEY=VALUE
  std::vector<std::string> image_pull_secrets;  // --image-pull-secret NAME
  std::vector<std::string> labels;              // --label KEY=VALUE, on every object
  std::string priority_class = "system-node-critical";
  std::string max_unavailable = "10%";  // the DaemonSet's rolling update: N or N%
  bool no_monitoring = false;           // no ServiceMonitor, PrometheusRule or dashboard
  std::string runbook_url = kDefaultRunbookUrl;
  std::optional<std::string> profiles_dir;  // --profiles DIR: the teams' profiles, as a ConfigMap
};

// The priority classes Kubernetes creates for the system, which a namespace other than
// kube-system may use only under a ResourceQuota that names them (the ResourceQuota admission
// plugin's limitedResources, as GKE configures it): guard_manifests adds one.
inline constexpr const char* kCriticalPriorityClasses[] = {"system-node-critical", "system-cluster-critical"};

// A --toleration as the pod spec's toleration: "all" is {operator: Exists} (every taint);
// KEY=VALUE:EFFECT is Equal; KEY[:EFFECT] is Exists; no EFFECT, every effect. Throws Error
// (exit 2) naming the flag otherwise. Pure.
nlohmann::ordered_json parse_toleration(const std::string& text);

// The image packaging/guard/build-image tags.
inline const std::string kDefaultGuardImage = std::string("gpu-run-guard:") + GPU_RUN_VERSION;

// The Grafana dashboard's JSON model: a pod's /dev/shm used and size over time, its peak, the
// growths and refused ones, what cannot grow now, and the containers each guard samples. Pure.
nlohmann::ordered_json guard_dashboard();

// The objects, in apply order. Pure. Throws Error (exit 2) naming the flag on a bad namespace,
// image, port, containerd state directory, toleration, node selector, pull secret, label,
// priority class, maxUnavailable or runbook URL. With `profiles` (read from --profiles), their
// ConfigMap too, mounted as the tree it was (profiles_config_map.hpp).
std::vector<nlohmann::ordered_json> guard_manifests(const GuardManifestOptions& options,
                                                    const ProfileTree* profiles = nullptr);

// The objects as one YAML stream, after a header that says what the guard's pod may do and why.
std::string render_guard_manifests(const GuardManifestOptions& options, const ProfileTree* profiles = nullptr);

// Reads --profiles (read_profile_tree, the built-ins beside this gpu-run-ctl) and prints the objects.
void run_guard_manifests(const GuardManifestOptions& options);

// Registers `guard-manifests` under the `k8s` command.
void add_k8s_guard_command(CLI::App& k8s);

}  // namespace gpurun
