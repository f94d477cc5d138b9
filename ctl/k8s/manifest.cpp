#include "manifest.hpp"

#include "error.hpp"
#include "k8s_quantity.hpp"
#include "yaml.hpp"

namespace gpurun {

using nlohmann::ordered_json;

void check_manifest_namespace(const std::string& ns) {
  if (!is_k8s_dns_label(ns))
    throw usage_error("--namespace '" + k8s_shown(ns) +
                      "': expected a namespace name (lowercase letters, digits and '-', at most 63)");
}

std::string manifest_image(const std::string& image, const std::string& fallback) {
  const std::string chosen = image.empty() ? fallback : image;
  for (const char ch : chosen)
    if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f)
      throw usage_error("--image '" + k8s_shown(chosen) + "': expected an image reference without spaces");
  if (chosen.empty() || chosen.size() > 512) throw usage_error("--image: expected an image reference");
  return chosen;
}

ordered_json app_labels(const std::string& app) { return {{"app.kubernetes.io/name", app}}; }

ordered_json manifest_metadata(const std::string& name, const std::string& ns, const std::string& app) {
  ordered_json m = {{"name", name}};
  if (!ns.empty()) m["namespace"] = ns;
  m["labels"] = app_labels(app);
  return m;
}

ordered_json manifest_object(const char* api_version, const char* kind, ordered_json metadata) {
  return {{"apiVersion", api_version}, {"kind", kind}, {"metadata", std::move(metadata)}};
}

std::string render_manifest_stream(const std::string& header, const std::vector<ordered_json>& objects) {
  std::string out = header;
  for (const ordered_json& object : objects) out += "---\n" + to_yaml(object);
  return out;
}

}  // namespace gpurun
