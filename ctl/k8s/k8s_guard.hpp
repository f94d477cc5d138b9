#pragma once

// `gpu-run-ctl k8s guard-manifests`: the Kubernetes objects that run the node guard
// (`gpu-run-ctl guard --engine containerd`) on every node, and what watches it: a Service, a
// ServiceMonitor, a PrometheusRule and a Grafana dashboard (packaging/kubernetes/gpu-run-guard.yaml
// is this command's output).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gpurun {

struct GuardManifestOptions {
  std::string namespace_name = "gpu-run-guard";
  std::string image;                                 // empty: kDefaultGuardImage
  std::string port = "9477";                         // the metrics port, 1 to 65535
  std::string containerd_state = "/run/containerd";  // the nodes' containerd state directory
};

// The image packaging/guard/build-image tags.
inline const std::string kDefaultGuardImage = std::string("gpu-run-guard:") + GPU_RUN_VERSION;

// The Grafana dashboard's JSON model: a pod's /dev/shm used and size over time, its peak, the
// growths and refused ones, what cannot grow now, and the containers each guard samples. Pure.
nlohmann::ordered_json guard_dashboard();

// The objects, in apply order. Pure. Throws Error (exit 2) naming the flag on a bad namespace,
// image, port or containerd state directory.
std::vector<nlohmann::ordered_json> guard_manifests(const GuardManifestOptions& options);

// The objects as one YAML stream, after a header that says what the guard's pod may do and why.
std::string render_guard_manifests(const GuardManifestOptions& options);

// Registers `guard-manifests` under the `k8s` command.
void add_k8s_guard_command(CLI::App& k8s);

}  // namespace gpurun
