#include "pod/pod_json.hpp"

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "base/units.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

constexpr const char* kGpuResource = "nvidia.com/gpu";

// A resource quantity as the API writes it (a string), or a number as a manifest or a
// hand-written review may give it (`cpu: 0.5`), read as its JSON text.
std::optional<std::string> resource(const json& container, const char* section, const char* name) {
  const json* r = member(container, "resources");
  const json* s = r ? member(*r, section) : nullptr;
  const json* v = s ? member(*s, name) : nullptr;
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return v->dump();
  throw usage_error(std::string("resources.") + section + "." + name + ": expected a quantity string");
}

}  // namespace

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_at(const json& j, const char* key) {
  const json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

const json& array_at(const json& j, const char* key) {
  static const json empty = json::array();
  const json* v = member(j, key);
  return v && v->is_array() ? *v : empty;
}

std::string container_name(const json& container) { return string_at(container, "name"); }

unsigned container_gpus(const json& container) {
  std::optional<std::string> q = resource(container, "limits", kGpuResource);
  if (!q) q = resource(container, "requests", kGpuResource);
  return q ? static_cast<unsigned>(parse_count(*q, "nvidia.com/gpu", 1024)) : 0;
}

unsigned container_cpus(const json& container, unsigned fallback) {
  std::optional<std::string> q = resource(container, "limits", "cpu");
  if (!q) q = resource(container, "requests", "cpu");
  return q ? parse_k8s_cpus(*q, "container '" + k8s_shown(container_name(container)) + "' cpu") : fallback;
}

std::optional<std::uint64_t> container_memory(const json& container, const char* section) {
  std::optional<std::string> q = resource(container, section, "memory");
  if (!q) return std::nullopt;
  return parse_k8s_quantity(*q, "container '" + k8s_shown(container_name(container)) + "' " + section + ".memory");
}

}  // namespace gpurun
