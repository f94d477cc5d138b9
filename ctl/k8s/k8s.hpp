#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl k8s -f MANIFEST`: the manifest with every pod template given /dev/shm by
// gpu-run-webhook's own review (Kubernetes has no shmSize).
struct K8sOptions {
  std::string filename;                   // -f: the manifest's path, or "-" for stdin
  std::optional<std::string> profile;     // the profile of a pod template that names none
  std::vector<std::string> profile_dirs;  // searched first
};

// What k8s -f made of a manifest: the manifest, and one line per pod template reviewed.
struct K8sResult {
  std::string manifest;
  std::vector<std::string> notes;
};

// The manifest `text` (from `source`, named in messages) with every pod template reviewed as
// gpu-run-webhook reviews a Pod (review_pod_templates, under `config`) and changed by its patch;
// every other object unchanged. YAML in, YAML out: a document with no changed template is its
// text, byte for byte, a changed one written anew (rewrite_yaml_document). JSON in (one value or
// a stream of them), JSON out, likewise. `default_profile` (or null): the profile of a template
// that names none. Throws Error (exit 2) naming source:line on what is not YAML or JSON, and on a
// template the webhook would deny. Pure but for the profile store's reads.
K8sResult render_k8s(const std::string& text, const std::string& source, const WebhookConfig& config,
                     const ProfileStore& store, const std::string* default_profile);

// Reads the manifest, checks --profile, prints the result (the notes on stderr).
void run_k8s(const K8sOptions& options);

// The RuntimeClass (node.k8s.io/v1) named `handler` that selects the containerd runtime
// handler `handler` (`gpu-run-ctl configure containerd`) and schedules its pods onto nodes
// labelled runtime_node_label(handler), as YAML. Throws Error (exit 2) when `handler` is not a
// DNS label. Pure.
std::string runtime_class_manifest(const std::string& handler);

// "gpu-run.io/runtime=HANDLER": the label of a node whose containerd has the handler.
std::string runtime_node_label(const std::string& handler);

// Registers `k8s` on `app`.
void add_k8s_command(CLI::App& app);

}  // namespace gpurun
