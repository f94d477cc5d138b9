#include "patch.hpp"

#include <optional>
#include <set>
#include <utility>

#include "contract.hpp"
#include "error.hpp"
#include "k8s_quantity.hpp"
#include "pod_json.hpp"
#include "sizing.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

std::string pointer(const ShmTarget& t) { return "/spec/" + t.list + "/" + std::to_string(t.index); }

// Adds `value` to the array at `path` (creating the array when `existing` is not one).
void append(json& ops, const std::string& path, const json* existing, json value) {
  if (existing && existing->is_array())
    ops.push_back({{"op", "add"}, {"path", path + "/-"}, {"value", std::move(value)}});
  else
    ops.push_back({{"op", "add"}, {"path", path}, {"value", json::array({std::move(value)})}});
}

std::string volume_name(const json& spec) {
  std::set<std::string> names;
  for (const json& v : array_at(spec, "volumes")) names.insert(string_at(v, "name"));
  std::string name = kShmVolumeName;
  for (unsigned n = 2; names.count(name); ++n) name = std::string(kShmVolumeName) + "-" + std::to_string(n);
  return name;
}

void add_env(json& ops, const ShmTarget& t) {
  const ShmDecision& d = t.decision;
  NameValues env;
  if (d.planned) {
    env = container_env(d.plan->profile, d.plan->gpus, d.plan->workers, d.plan->batch_size, d.size);
  } else {
    for (auto& nv : container_env("", 0, 0, 0, d.size))
      if (nv.first == kEnvShmSize) env.push_back(nv);
  }
  const json* existing = member(*t.container, "env");
  const std::string path = pointer(t) + "/env";
  json fresh = json::array();
  for (const auto& [name, value] : env) {
    json entry = {{"name", name}, {"value", value}};
    std::optional<std::size_t> at;
    if (existing && existing->is_array())
      for (std::size_t i = 0; i < existing->size(); ++i)
        if (string_at((*existing)[i], "name") == name) at = i;
    if (at)
      ops.push_back({{"op", "replace"}, {"path", path + "/" + std::to_string(*at)}, {"value", entry}});
    else if (existing && existing->is_array())
      ops.push_back({{"op", "add"}, {"path", path + "/-"}, {"value", entry}});
    else
      fresh.push_back(entry);
  }
  if (!fresh.empty()) ops.push_back({{"op", "add"}, {"path", path}, {"value", fresh}});
}

// The memory limit and request, each raised by this container's shm (and the limit at
// least to what the budget needs). A container without one keeps having none.
void raise_memory(json& ops, const ShmTarget& t, double memory_fraction_max) {
  const std::uint64_t shm = t.decision.size;
  const std::string who = "container '" + k8s_shown(container_name(*t.container)) + "'";
  try {
    for (const char* section : {"limits", "requests"}) {
      const std::optional<std::uint64_t> old = container_memory(*t.container, section);
      if (!old) continue;
      std::uint64_t raised = *old + shm;
      const MemoryBudget budget{raised, memory_fraction_max};
      if (std::string(section) == "limits" && !budget.holds(shm)) raised = budget.limit_for(shm);
      ops.push_back({{"op", "replace"},
                     {"path", pointer(t) + "/resources/" + section + "/memory"},
                     {"value", k8s_quantity(raised)}});
    }
  } catch (const Error& e) {
    throw CannotMeet{who + ": " + e.what()};
  }
}

}  // namespace

json shm_patch(const json& spec, const std::vector<ShmTarget>& targets, std::uint64_t total,
               const WebhookConfig& config) {
  try {
    json ops = json::array();
    const std::string volume = volume_name(spec);
    append(ops, "/spec/volumes", member(spec, "volumes"),
           {{"name", volume}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", k8s_quantity(total)}}}});
    for (const ShmTarget& t : targets) {
      const json& c = *t.container;
      const std::string base = pointer(t);
      append(ops, base + "/volumeMounts", member(c, "volumeMounts"), {{"name", volume}, {"mountPath", kShmMountPath}});
      add_env(ops, t);
      if (config.policy == WebhookPolicy::kRaise) raise_memory(ops, t, config.memory_fraction_max);
    }
    return ops;
  } catch (const Error& e) {
    throw CannotMeet{e.what()};
  }
}

bool is_shm_volume_of_ours(const json& spec, const std::string& volume) {
  if (volume.rfind(kShmVolumeName, 0) != 0) return false;
  for (const json& v : array_at(spec, "volumes"))
    if (string_at(v, "name") == volume) {
      const json* e = member(v, "emptyDir");
      return e && string_at(*e, "medium") == "Memory";
    }
  return false;
}

}  // namespace gpurun
