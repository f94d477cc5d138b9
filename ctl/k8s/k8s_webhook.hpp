#pragma once

// `gpu-run-ctl k8s webhook-manifests`: the Kubernetes objects that run gpu-run-webhook in a
// cluster (packaging/kubernetes/gpu-run-webhook.yaml is this command's output).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ctl/k8s/k8s_webhook_cert.hpp"
#include "ctl/k8s/manifest.hpp"
#include "ctl/k8s/profiles_config_map.hpp"

namespace CLI {
class App;
}

namespace gpurun {

struct WebhookManifestOptions {
  std::string namespace_name = "gpu-run";
  std::string image;  // empty: kDefaultWebhookImage
  bool cert_manager = false;
  std::optional<std::string> self_signed_dir;
  std::optional<std::string> config_file;       // --config: the webhook's webhook.json (default: kDefaultWebhookConfig)
  std::vector<std::string> apiserver_cidrs;     // --apiserver-cidr: the only sources the NetworkPolicy admits
  std::vector<std::string> labels;              // --label KEY=VALUE, on every object
  std::vector<std::string> image_pull_secrets;  // --image-pull-secret NAME: the image's registry is private
  bool no_monitoring = false;                   // no PrometheusRule
  std::string runbook_url = kDefaultRunbookUrl;
  std::optional<std::string> profiles_dir;  // --profiles DIR: the teams' profiles, as a ConfigMap
  // Placement, as the guard's flags: --toleration (none by default), --node-selector,
  // --priority-class (none by default) and --replicas.
  std::vector<std::string> tolerations;
  std::vector<std::string> node_selectors;
  std::string priority_class;
  std::string replicas = "2";
};

// The webhook's own config (pod/webhook_config.hpp, gpu-run-webhook(1)), as the ConfigMap ships it
// without --config.
inline constexpr const char* kDefaultWebhookConfig =
    R"({"policy": "raise", "memory_fraction_max": 0.5, "default_cpus": 1, "namespace_profiles": {}})";

// The webhook's name in the MutatingWebhookConfiguration, and so the `name` label of the API
// server's admission webhook series the alerts read.
inline constexpr const char* kWebhookName = "shm.gpu-run.io";

// The CEL expression of the webhook's matchConditions: a pod that asks (a gpu-run.* or CRI-O's
// shm-size annotation) or whose containers request nvidia.com/gpu (a namespace default sizes those).
extern const char* const kWebhookMatchExpression;

// The image packaging/webhook/build-image tags.
inline const std::string kDefaultWebhookImage = std::string("gpu-run-webhook:") + GPU_RUN_VERSION;

// The namespace label that opts a namespace's pods in: `kubectl label namespace NS
// gpu-run.io/webhook=enabled`.
inline constexpr const char* kWebhookOptInLabel = "gpu-run.io/webhook";

// The Service's DNS names in `namespace_name` (the serving certificate's names).
std::vector<std::string> webhook_dns_names(const std::string& namespace_name);

// The objects, in apply order. `tls`: the self-signed pair (a Secret and the caBundle); without
// it cert-manager objects (a CA chain). `config`: webhook.json's text, checked. Pure. Throws
// Error (exit 2) on a bad namespace, image, config, CIDR, label, runbook URL, toleration, node
// selector, priority class or replica count. With `profiles` (read from --profiles), their
// ConfigMap too, mounted as the tree it was (profiles_config_map.hpp).
std::vector<nlohmann::ordered_json> webhook_manifests(const WebhookManifestOptions& options,
                                                      const std::optional<WebhookTlsPair>& tls,
                                                      const std::string& config = kDefaultWebhookConfig,
                                                      const ProfileTree* profiles = nullptr);

// Throws Error (exit 2) naming --apiserver-cidr unless `cidr` is an IPv4 or IPv6 CIDR.
void check_cidr(const std::string& cidr);

// The objects as one YAML stream with a header comment.
std::string render_webhook_manifests(const WebhookManifestOptions& options, const std::optional<WebhookTlsPair>& tls,
                                     const std::string& config = kDefaultWebhookConfig,
                                     const ProfileTree* profiles = nullptr);

void run_webhook_manifests(const WebhookManifestOptions& options);

// Registers `webhook-manifests` under the `k8s` command.
void add_k8s_webhook_command(CLI::App& k8s);

}  // namespace gpurun
