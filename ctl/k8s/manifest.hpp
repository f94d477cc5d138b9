#pragma once

// What the commands that print Kubernetes objects (k8s webhook-manifests, k8s guard-manifests)
// share: the checks of the flags both take, an object's skeleton, and the YAML stream.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpurun {

// The teams' profiles, an optional ConfigMap each server mounts as a profile directory
// (`kubectl -n NS create configmap gpu-run-profiles --from-file=DIR`).
inline constexpr const char* kProfilesConfigMap = "gpu-run-profiles";

// Throws Error (exit 2) naming --namespace unless `ns` is a namespace name (a DNS label).
void check_manifest_namespace(const std::string& ns);

// `image`, or `fallback` when `image` is empty. Throws Error (exit 2) naming --image unless the
// result is an image reference: 1 to 512 characters, no spaces or control characters.
std::string manifest_image(const std::string& image, const std::string& fallback);

// {"app.kubernetes.io/name": app}: every object's labels, and the pods' selector.
nlohmann::ordered_json app_labels(const std::string& app);

// An object's metadata: its name, its namespace (left out when empty: a cluster-scoped object)
// and app_labels(app).
nlohmann::ordered_json manifest_metadata(const std::string& name, const std::string& ns, const std::string& app);

// {"apiVersion", "kind", "metadata"}: the start of every object.
nlohmann::ordered_json manifest_object(const char* api_version, const char* kind, nlohmann::ordered_json metadata);

// `header` (comment lines, each ending in a newline), then each object as a YAML document.
std::string render_manifest_stream(const std::string& header, const std::vector<nlohmann::ordered_json>& objects);

}  // namespace gpurun
