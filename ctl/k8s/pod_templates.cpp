#include "ctl/k8s/pod_templates.hpp"

#include <string_view>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The API group of an apiVersion: "apps" of "apps/v1", "" of "v1".
std::string api_group(const ordered_json& object) {
  const auto it = object.find("apiVersion");
  if (it == object.end() || !it->is_string()) return "";
  const std::string& v = it->get_ref<const std::string&>();
  const auto slash = v.find('/');
  return slash == std::string::npos ? "" : v.substr(0, slash);
}

std::string string_member(const ordered_json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// Where each kind keeps its template (a JSON pointer), by API group.
struct TemplatePlace {
  std::string_view group;
  std::string_view kind;
  const char* pointer;
};
constexpr TemplatePlace kTemplatePlaces[] = {
    {"", "Pod", ""},
    {"", "PodTemplate", "/template"},
    {"", "ReplicationController", "/spec/template"},
    {"apps", "Deployment", "/spec/template"},
    {"apps", "ReplicaSet", "/spec/template"},
    {"apps", "StatefulSet", "/spec/template"},
    {"apps", "DaemonSet", "/spec/template"},
    {"extensions", "Deployment", "/spec/template"},
    {"extensions", "ReplicaSet", "/spec/template"},
    {"extensions", "DaemonSet", "/spec/template"},
    {"batch", "Job", "/spec/template"},
    {"batch", "CronJob", "/spec/jobTemplate/spec/template"},
};
// Kubeflow's training operator keeps a template per role: spec.<x>ReplicaSpecs.<role>.template.
constexpr std::string_view kKubeflowGroup = "kubeflow.org";
constexpr std::string_view kReplicaSpecs = "ReplicaSpecs";

std::string escape_pointer_token(const std::string& token) {
  std::string out;
  for (const char c : token) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// "/spec/template" as a message shows it: "spec.template".
std::string dotted(const std::string& pointer) {
  std::string out;
  std::string_view rest(pointer);
  while (!rest.empty()) {
    rest.remove_prefix(1);
    const auto next = rest.find('/');
    std::string token(rest.substr(0, next));
    for (auto at = token.find("~1"); at != std::string::npos; at = token.find("~1", at + 1)) token.replace(at, 2, "/");
    for (auto at = token.find("~0"); at != std::string::npos; at = token.find("~0", at + 1)) token.replace(at, 2, "~");
    out += (out.empty() ? "" : ".") + token;
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
  }
  return out;
}

std::string object_label(const ordered_json& object) {
  std::string kind = string_member(object, "kind");
  const auto meta = object.find("metadata");
  std::string name, ns;
  if (meta != object.end() && meta->is_object()) {
    name = string_member(*meta, "name");
    if (name.empty()) name = string_member(*meta, "generateName");
    ns = string_member(*meta, "namespace");
  }
  return k8s_shown(kind.empty() ? "object" : kind) + " " + (ns.empty() ? "" : k8s_shown(ns) + "/") +
         (name.empty() ? "(unnamed)" : k8s_shown(name));
}

void review_object(ordered_json& object, const std::string& prefix, const WebhookConfig& config,
                   const ProfileStore& store, const std::string* default_profile, std::vector<TemplateReview>& out) {
  if (!object.is_object()) return;
  const std::string kind = string_member(object, "kind");
  // A List (kubectl get -o yaml) or a typed list (PodList): each item in turn.
  if (kind.size() >= 4 && kind.compare(kind.size() - 4, 4, "List") == 0) {
    const auto items = object.find("items");
    if (items != object.end() && items->is_array())
      for (std::size_t i = 0; i < items->size(); ++i)
        review_object((*items)[i], prefix + "items[" + std::to_string(i) + "] ", config, store, default_profile, out);
    return;
  }
  for (const std::string& pointer : pod_template_pointers(object)) {
    ordered_json& tmpl = object[ordered_json::json_pointer(pointer)];
    // The pod the webhook would see: the template's metadata and spec.
    ordered_json pod = pointer.empty() ? tmpl : ordered_json{{"apiVersion", "v1"}, {"kind", "Pod"}};
    if (!pointer.empty()) {
      if (tmpl.contains("metadata")) pod["metadata"] = tmpl["metadata"];
      if (tmpl.contains("spec")) pod["spec"] = tmpl["spec"];
    }
    TemplateReview r{prefix + object_label(object), dotted(pointer),
                     review_pod(json::parse(pod.dump()), config, store, default_profile, "gpu-run-ctl k8s")};
    if (r.review.outcome == ReviewOutcome::kPatched) {
      try {
        const ordered_json patched = pod.patch(ordered_json::parse(r.review.patch.dump()));
        if (pointer.empty()) {
          tmpl = patched;
        } else {
          for (const char* key : {"metadata", "spec"})
            if (patched.contains(key)) tmpl[key] = patched[key];
        }
      } catch (const nlohmann::json::exception& e) {
        throw Error(r.object + " " + r.where + ": apply the review's patch: " + e.what());
      }
    }
    out.push_back(std::move(r));
  }
}

}  // namespace

std::vector<std::string> pod_template_pointers(const ordered_json& object) {
  std::vector<std::string> out;
  if (!object.is_object()) return out;
  const std::string group = api_group(object);
  const std::string kind = string_member(object, "kind");
  const auto is_template = [&](const std::string& pointer) {
    const ordered_json::json_pointer p(pointer);
    return object.contains(p) && object[p].is_object();
  };
  for (const TemplatePlace& place : kTemplatePlaces)
    if (place.group == group && place.kind == kind && is_template(place.pointer)) out.push_back(place.pointer);
  const auto spec = object.find("spec");
  if (group == kKubeflowGroup && spec != object.end() && spec->is_object())
    for (const auto& [key, roles] : spec->items()) {
      if (key.size() <= kReplicaSpecs.size() ||
          key.compare(key.size() - kReplicaSpecs.size(), kReplicaSpecs.size(), kReplicaSpecs) != 0 ||
          !roles.is_object())
        continue;
      for (const auto& [role, replicas] : roles.items()) {
        const std::string pointer =
            "/spec/" + escape_pointer_token(key) + "/" + escape_pointer_token(role) + "/template";
        if (replicas.is_object() && is_template(pointer)) out.push_back(pointer);
      }
    }
  return out;
}

std::vector<TemplateReview> review_pod_templates(ordered_json& object, const WebhookConfig& config,
                                                 const ProfileStore& store, const std::string* default_profile) {
  std::vector<TemplateReview> out;
  review_object(object, "", config, store, default_profile, out);
  return out;
}

}  // namespace gpurun
