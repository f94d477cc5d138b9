#pragma once

// What the commands that print Kubernetes objects (k8s webhook-manifests, k8s guard-manifests)
// share: the checks of the flags both take, an object's skeleton, and the YAML stream.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpurun {

// The teams' profiles, an optional ConfigMap each server mounts as a profile directory
// (`k8s webhook-manifests --profiles DIR`, `k8s guard-manifests --profiles DIR`).
inline constexpr const char* kProfilesConfigMap = "gpu-run-profiles";

// Throws Error (exit 2) naming `flag` unless `ns` is a namespace name (a DNS label).
void check_manifest_namespace(const std::string& ns, const std::string& flag = "--namespace");

// `image`, or `fallback` when `image` is empty. Throws Error (exit 2) naming --image unless the
// result is an image reference: 1 to 512 characters, no spaces or control characters.
std::string manifest_image(const std::string& image, const std::string& fallback);

// [{"name": NAME}, ...]: a pod's imagePullSecrets from the repeatable --image-pull-secret NAME.
// Throws Error (exit 2) naming the flag and `whose` namespace ("the guard's") unless each is a
// Secret's name.
nlohmann::ordered_json image_pull_secrets(const std::vector<std::string>& names, const std::string& whose);

// {"app.kubernetes.io/name": app}: every object's labels, and the pods' selector.
nlohmann::ordered_json app_labels(const std::string& app);

// An object's metadata: its name, its namespace (left out when empty: a cluster-scoped object)
// and app_labels(app).
nlohmann::ordered_json manifest_metadata(const std::string& name, const std::string& ns, const std::string& app);

// {"apiVersion", "kind", "metadata"}: the start of every object.
nlohmann::ordered_json manifest_object(const char* api_version, const char* kind, nlohmann::ordered_json metadata);

// `header` (comment lines, each ending in a newline), then each object as a YAML document.
std::string render_manifest_stream(const std::string& header, const std::vector<nlohmann::ordered_json>& objects);

// True for a label key as Kubernetes takes it: an optional DNS-subdomain prefix and '/', then a
// name of at most 63 letters, digits, '-', '_' and '.', starting and ending alphanumeric.
bool is_label_key(const std::string& key);

// True for a label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and
// ending alphanumeric.
bool is_label_value(const std::string& value);

// True for a DNS subdomain (a Secret's or a PriorityClass's name): at most 253 lowercase letters,
// digits, '-' and '.'.
bool is_dns_subdomain(const std::string& name);

// The KEY=VALUE items of the repeatable `flag` (--label, --node-selector) as a map, in order.
// Throws Error (exit 2) naming the flag and the item that is not a label key and value; a --label
// may not set app.kubernetes.io/name, which the objects' selectors use.
nlohmann::ordered_json parse_label_flags(const std::vector<std::string>& items, const std::string& flag);

// Adds `labels` to the metadata.labels of every object (--label: the label a Prometheus or a
// policy selects objects by).
void add_object_labels(std::vector<nlohmann::ordered_json>& objects, const nlohmann::ordered_json& labels);

// The project's repository (packaging/cpack.cmake's CPACK_PACKAGE_HOMEPAGE_URL says the same).
inline constexpr const char* kProjectUrl = "https://github.com/gpu-run/gpu-run";

// The docs' page every alert's runbook_url points into: docs/kubernetes.md of this version in the
// project's repository, an https link a browser opens from Alertmanager (--runbook-url: the same
// page as the team serves it).
inline const std::string kDefaultRunbookUrl =
    std::string(kProjectUrl) + "/blob/v" + GPU_RUN_VERSION + "/docs/kubernetes.md";

// Throws Error (exit 2) naming --runbook-url unless `url` is an http, https or file URL without
// spaces or a '#'.
void check_runbook_url(const std::string& url);

// `base`#<alert in lowercase>: the alert's section of docs/kubernetes.md (its heading is the
// alert's name).
std::string runbook_url(const std::string& base, const std::string& alert);

// A PrometheusRule's alert: `expr`, held `for_duration` (null: fires at the first evaluation),
// severity warning, a summary, a description and its runbook_url under `runbooks`.
nlohmann::ordered_json prometheus_alert(const char* name, const std::string& expr, const char* for_duration,
                                        const std::string& runbooks, const std::string& summary,
                                        const std::string& description);

}  // namespace gpurun
