#include "pod/patch.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "decision/growth_limits.hpp"
#include "decision/sizing.hpp"
#include "pod/pod_json.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

std::string pointer(const PodShmTarget& t) { return "/spec/" + t.list + "/" + std::to_string(t.index); }

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

// The container's environment: what gpu-run planned, the /dev/shm it shares (`volume`: the
// emptyDir's planned size, whatever its share), the most the node guard may grow it to, and the
// pod's decision record (`record`, where the guard finds it on any node).
void add_env(json& ops, const PodShmTarget& t, std::uint64_t volume, std::uint64_t size_limit,
             const std::string& record) {
  const ShmDecision& d = t.decision;
  NameValues env;
  if (d.planned) {
    env = container_env(d.plan->profile, d.plan->gpus, d.plan->workers, d.plan->batch_size, volume);
  } else {
    for (auto& nv : container_env("", 0, 0, 0, volume))
      if (nv.first == kEnvShmSize) env.push_back(nv);
  }
  env.emplace_back(kEnvShmLimit, engine_size(size_limit));
  env.emplace_back(kEnvDecision, record);
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

// The container's memory `section` ("limits" or "requests") as the patch leaves it: under
// "raise", the old one plus this container's shm (and the limit at least to what the budget
// needs); else as it is. Empty for a container without one.
std::optional<std::uint64_t> patched_memory(const PodShmTarget& t, const char* section, const WebhookConfig& config) {
  const std::optional<std::uint64_t> old = container_memory(*t.container, section);  // names the container
  if (!old || config.policy != WebhookPolicy::kRaise) return old;
  const std::uint64_t shm = t.decision.size;
  std::uint64_t raised = *old + shm;
  const MemoryBudget budget{raised, config.memory_fraction_max};
  if (std::string(section) == "limits" && !budget.holds(shm)) raised = budget.limit_for(shm);
  return raised;
}

// The memory limit and request, each raised by this container's shm (patched_memory). A
// container without a limit keeps having none; one without a limit or a request is given a
// request of its shm, so that the scheduler counts the pages of the emptyDir the kubelet mounts.
void raise_memory(json& ops, const PodShmTarget& t, const WebhookConfig& config) {
  for (const char* section : {"limits", "requests"})
    if (const auto raised = patched_memory(t, section, config))
      ops.push_back({{"op", "replace"},
                     {"path", pointer(t) + "/resources/" + section + "/memory"},
                     {"value", k8s_quantity(*raised)}});
  if (patched_memory(t, "limits", config) || patched_memory(t, "requests", config)) return;
  const std::string memory = k8s_quantity(t.decision.size);
  const json* resources = member(*t.container, "resources");
  const json* requests = resources ? member(*resources, "requests") : nullptr;
  if (requests && requests->is_object())
    ops.push_back({{"op", "add"}, {"path", pointer(t) + "/resources/requests/memory"}, {"value", memory}});
  else if (resources && resources->is_object())
    ops.push_back({{"op", "add"}, {"path", pointer(t) + "/resources/requests"}, {"value", {{"memory", memory}}}});
  else
    ops.push_back(
        {{"op", "add"}, {"path", pointer(t) + "/resources"}, {"value", {{"requests", {{"memory", memory}}}}}});
}

// The most the node guard may grow this container's share to (growth_ceiling: the profile's
// max_shm, the budget of its memory limit as patched). Without a memory limit no budget bounds
// it and the kubelet mounts the emptyDir at its sizeLimit from the start, so the ceiling is the
// plan (the size its memory request covers), not max_shm (256Gi for the default profile).
std::uint64_t share_ceiling(const PodShmTarget& t, const WebhookConfig& config) {
  const std::optional<std::uint64_t> limit = patched_memory(t, "limits", config);
  if (!limit) return t.decision.size;
  return empty_dir_size_limit(t.decision.size, t.decision.plan ? t.decision.plan->max_shm : 0, limit,
                              config.memory_fraction_max);
}

}  // namespace

std::uint64_t pod_size_limit(const std::vector<PodShmTarget>& targets, const WebhookConfig& config) {
  // The kubelet mounts the emptyDir at its sizeLimit and evicts the pod when use passes it:
  // the sizeLimit is the ceiling the node guard may grow /dev/shm to. The tmpfs starts there and
  // the guard never lowers it (fail-static; docs/ARCHITECTURE.md, "A pod's memory-backed
  // emptyDir"), so a pod has the same /dev/shm with or without a guard.
  std::uint64_t size_limit = 0;
  for (const PodShmTarget& t : targets) {
    const std::uint64_t ceiling = share_ceiling(t, config);
    size_limit = size_limit + ceiling < size_limit ? UINT64_MAX : size_limit + ceiling;
  }
  return size_limit;
}

DecisionRecord pod_decision(const std::vector<PodShmTarget>& targets, std::uint64_t total, std::uint64_t size_limit,
                            const std::string& door) {
  DecisionRecord pod;
  pod.door = door;
  pod.size = total;
  pod.ceiling = size_limit;
  std::set<std::string> profiles;
  for (const PodShmTarget& t : targets) {
    const DecisionRecord one = decision_record(t.decision, door);
    pod.need += one.need;
    pod.headroom += one.headroom;
    pod.batch_bytes = std::max(pod.batch_bytes, one.batch_bytes);
    pod.gpus += one.gpus;
    pod.workers += one.workers;
    if (!pod.batch_size) pod.batch_size = one.batch_size;
    if (!one.profile.empty() && profiles.insert(one.profile).second)
      pod.profile += (pod.profile.empty() ? "" : ",") + one.profile;
    if (pod.reason.empty()) pod.reason = one.reason;
  }
  pod.profile = pod.profile.substr(0, 200);
  return pod;
}

json decision_annotation_op(const json& pod, const DecisionRecord& record) {
  const std::string text = decision_text(record);
  const json* meta = member(pod, "metadata");
  const json* annotations = meta ? member(*meta, "annotations") : nullptr;
  if (!meta || !meta->is_object())
    return {{"op", "add"}, {"path", "/metadata"}, {"value", {{"annotations", {{kDecisionKey, text}}}}}};
  if (!annotations || !annotations->is_object())
    return {{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{kDecisionKey, text}}}};
  // "add" on an object member replaces it: a record the pod carried is the webhook's now.
  return {{"op", "add"}, {"path", std::string("/metadata/annotations/") + kDecisionKey}, {"value", text}};
}

json shm_patch(const json& spec, const std::vector<PodShmTarget>& targets, std::uint64_t total,
               const WebhookConfig& config, const DecisionRecord& record) {
  const std::uint64_t size_limit = pod_size_limit(targets, config);
  json ops = json::array();
  const std::string volume = volume_name(spec);
  append(ops, "/spec/volumes", member(spec, "volumes"),
         {{"name", volume}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", k8s_quantity(size_limit)}}}});
  for (const PodShmTarget& t : targets) {
    const json& c = *t.container;
    const std::string base = pointer(t);
    append(ops, base + "/volumeMounts", member(c, "volumeMounts"), {{"name", volume}, {"mountPath", kShmMountPath}});
    add_env(ops, t, total, size_limit, decision_text(record));
    if (config.policy == WebhookPolicy::kRaise) raise_memory(ops, t, config);
  }
  return ops;
}

bool is_shm_volume_of_ours(const json& spec, const json& container, const std::string& volume) {
  bool ours = volume.rfind(kShmVolumeName, 0) == 0;
  if (volume == kOldShmVolumeName)
    for (const json& e : array_at(container, "env"))
      if (string_at(e, "name") == kEnvShmLimit) ours = true;
  if (!ours) return false;
  for (const json& v : array_at(spec, "volumes"))
    if (string_at(v, "name") == volume) {
      const json* e = member(v, "emptyDir");
      return e && string_at(*e, "medium") == "Memory";
    }
  return false;
}

}  // namespace gpurun
