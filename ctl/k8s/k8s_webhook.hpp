#pragma once

// `gpu-run-ctl k8s webhook-manifests`: the Kubernetes objects that run gpu-run-webhook in a
// cluster (packaging/kubernetes/gpu-run-webhook.yaml is this command's output).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "k8s_webhook_cert.hpp"

namespace CLI {
class App;
}

namespace gpurun {

struct WebhookManifestOptions {
  std::string namespace_name = "gpu-run";
  std::string image;  // empty: kDefaultWebhookImage
  bool cert_manager = false;
  std::optional<std::string> self_signed_dir;
};

// The image packaging/webhook/build-image tags.
inline const std::string kDefaultWebhookImage = std::string("gpu-run-webhook:") + GPU_RUN_VERSION;

// The namespace label that opts a namespace's pods in: `kubectl label namespace NS
// gpu-run.io/webhook=enabled`.
inline constexpr const char* kWebhookOptInLabel = "gpu-run.io/webhook";

// The Service's DNS names in `namespace_name` (the serving certificate's names).
std::vector<std::string> webhook_dns_names(const std::string& namespace_name);

// The objects, in apply order. `tls`: the self-signed pair (a Secret and the caBundle); without
// it cert-manager objects. Pure. Throws Error (exit 2) on a bad namespace or image.
std::vector<nlohmann::ordered_json> webhook_manifests(const WebhookManifestOptions& options,
                                                      const std::optional<WebhookTlsPair>& tls);

// The objects as one YAML stream with a header comment.
std::string render_webhook_manifests(const WebhookManifestOptions& options, const std::optional<WebhookTlsPair>& tls);

void run_webhook_manifests(const WebhookManifestOptions& options);

// Registers `webhook-manifests` under the `k8s` command.
void add_k8s_webhook_command(CLI::App& k8s);

}  // namespace gpurun
