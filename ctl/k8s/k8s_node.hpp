#pragma once

// `gpu-run-ctl k8s node-manifests`: the node installer's DaemonSet (gpu-run-ctl node install on
// each GPU node, from the guard's image, with the host's / mounted), and with --uninstall the
// DaemonSet that takes gpu-run off every node again (packaging/kubernetes/gpu-run-node.yaml and
// gpu-run-node-uninstall.yaml are this command's output).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ctl/k8s/k8s_guard.hpp"

namespace CLI {
class App;
}

namespace gpurun {

struct NodeManifestOptions : DaemonSetPlacementFlags {
  std::string namespace_name = "gpu-run-node";
  std::string image;                                      // empty: kDefaultGuardImage (it holds the programs)
  std::string pause_image = "registry.k8s.io/pause:3.9";  // what the pod runs once the init container is done
  std::string handler = "gpu-run";
  std::string containerd_config = "/etc/containerd/config.toml";  // on the nodes
  std::string cri_socket = "/run/containerd/containerd.sock";     // on the nodes
  std::vector<std::string> labels;                                // --label KEY=VALUE, on every object
  bool uninstall = false;                                         // the DaemonSet that runs `node uninstall` instead
};

// The objects, in apply order: the Namespace, the installer's DaemonSet (or the uninstaller's),
// and, for the install, the RuntimeClass. No RBAC: the pods never call the API server (the
// label comes from Node Feature Discovery). Pure. Throws Error (exit 2) naming the flag.
std::vector<nlohmann::ordered_json> node_manifests(const NodeManifestOptions& options);

// The objects as one YAML stream after a header saying what the pods do and why they may.
std::string render_node_manifests(const NodeManifestOptions& options);

// Registers `node-manifests` under the `k8s` command.
void add_k8s_node_command(CLI::App& k8s);

}  // namespace gpurun
