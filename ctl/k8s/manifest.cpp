#include "ctl/k8s/manifest.hpp"

#include <cctype>
#include <regex>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/k8s/yaml.hpp"

namespace gpurun {

using nlohmann::ordered_json;

void check_manifest_namespace(const std::string& ns, const std::string& flag) {
  if (!is_k8s_dns_label(ns))
    throw usage_error(flag + " '" + k8s_shown(ns) +
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

ordered_json image_pull_secrets(const std::vector<std::string>& names, const std::string& whose) {
  ordered_json out = ordered_json::array();
  for (const std::string& name : names) {
    if (!is_dns_subdomain(name))
      throw usage_error("--image-pull-secret '" + k8s_shown(name) +
                        "': expected the name of a Secret of type kubernetes.io/dockerconfigjson in " + whose +
                        " namespace (lowercase letters, digits, '-' and '.')");
    out.push_back({{"name", name}});
  }
  return out;
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

namespace {

bool is_label_name(const std::string& name) {
  static const std::regex re("([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)");
  return !name.empty() && name.size() <= 63 && std::regex_match(name, re);
}

}  // namespace

bool is_dns_subdomain(const std::string& name) {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !name.empty() && name.size() <= 253 && std::regex_match(name, re);
}

bool is_label_key(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos) return is_label_name(key);
  return is_dns_subdomain(key.substr(0, slash)) && is_label_name(key.substr(slash + 1));
}

bool is_label_value(const std::string& value) { return value.empty() || is_label_name(value); }

ordered_json parse_label_flags(const std::vector<std::string>& items, const std::string& flag) {
  ordered_json out = ordered_json::object();
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || !is_label_key(key) || !is_label_value(value))
      throw usage_error(flag + " '" + k8s_shown(item) +
                        "': expected KEY=VALUE, a Kubernetes label (KEY: [PREFIX/]NAME, each part letters, digits, "
                        "'-', '_', '.'; at most 63 characters a name or value)");
    if (flag == "--label" && key == "app.kubernetes.io/name")
      throw usage_error("--label '" + k8s_shown(item) +
                        "': app.kubernetes.io/name is the objects' own, which their selectors use; choose another key");
    out[key] = value;
  }
  return out;
}

void add_object_labels(std::vector<ordered_json>& objects, const ordered_json& labels) {
  for (ordered_json& o : objects)
    for (const auto& [key, value] : labels.items()) o["metadata"]["labels"][key] = value;
}

void check_runbook_url(const std::string& url) {
  bool ok = url.rfind("https://", 0) == 0 || url.rfind("http://", 0) == 0 || url.rfind("file:///", 0) == 0;
  for (const char ch : url) ok = ok && static_cast<unsigned char>(ch) > ' ' && ch != 0x7f && ch != '#';
  if (!ok || url.size() > 1024)
    throw usage_error("--runbook-url '" + k8s_shown(url) +
                      "': expected the URL of docs/kubernetes.md as your team serves it (http, https or file, no "
                      "'#': each alert adds its own section)");
}

std::string runbook_url(const std::string& base, const std::string& alert) {
  std::string anchor;
  for (const char ch : alert) anchor += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return base + "#" + anchor;
}

ordered_json prometheus_alert(const char* name, const std::string& expr, const char* for_duration,
                              const std::string& runbooks, const std::string& summary, const std::string& description) {
  ordered_json a = {{"alert", name}, {"expr", expr}};
  if (for_duration) a["for"] = for_duration;
  a["labels"] = {{"severity", "warning"}};
  a["annotations"] = {{"summary", summary}, {"description", description}, {"runbook_url", runbook_url(runbooks, name)}};
  return a;
}

}  // namespace gpurun
