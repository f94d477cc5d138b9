#include "pod_request.hpp"

#include <set>
#include <utility>

#include "config.hpp"
#include "contract.hpp"
#include "error.hpp"
#include "k8s_quantity.hpp"
#include "oci.hpp"
#include "patch.hpp"
#include "pod_json.hpp"
#include "profile.hpp"
#include "sizing.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

constexpr std::size_t kKnownProfilesShown = 20;

// Core's messages name gpu-run's flags; a pod sets the annotations of the same names. Its
// "unknown profile" points at gpu-run-ctl, which a cluster's users do not have: the names this
// webhook knows instead.
std::string pod_words(std::string message, const ProfileStore& store) {
  for (const auto& [flag, annotation] :
       {std::pair<const char*, const char*>{"--workers", request_key(RequestKey::kWorkers).annotation},
        {"--batch-size", request_key(RequestKey::kBatchSize).annotation}})
    for (auto at = message.find(flag); at != std::string::npos; at = message.find(flag, at))
      message.replace(at, std::string(flag).size(), annotation);
  const auto hint = message.find(kProfilesListHint);
  if (hint != std::string::npos) {
    std::string known;
    const std::vector<ProfileEntry> entries = store.list();
    for (std::size_t i = 0; i < entries.size() && i < kKnownProfilesShown; ++i)
      known += (i ? ", " : "") + entries[i].name;
    if (entries.size() > kKnownProfilesShown)
      known += " and " + std::to_string(entries.size() - kKnownProfilesShown) + " more";
    const auto end = message.find(')', hint);
    message.replace(hint, end == std::string::npos ? std::string::npos : end - hint,
                    "profiles this webhook knows: " + (known.empty() ? std::string("none") : known));
  }
  return message;
}

}  // namespace

PodRequest::PodRequest(const json& pod, const WebhookConfig& config, const ProfileStore& store,
                       const std::string* namespace_profile)
    : pod_(pod), config_(config), store_(store), namespace_profile_(namespace_profile) {}

void PodRequest::decide() {
  try {
    decide_all();
  } catch (const Error& e) {
    throw CannotMeet{e.what()};
  }
}

std::string PodRequest::default_profile_used() const {
  return namespace_profile_ && !annotations_.count(request_key(RequestKey::kProfile).annotation) ? *namespace_profile_
                                                                                                 : "";
}

std::string PodRequest::target_names() const {
  std::string out;
  for (const PodShmTarget& t : targets_) out += (out.empty() ? "" : ",") + container_name(*t.container);
  return out;
}

void PodRequest::decide_all() {
  read_annotations();
  // gpu-run.containers alone says where, not what: nothing is asked.
  if (!has_request_annotation(annotations_)) {
    if (!namespace_profile_) throw LeaveAlone{"no gpu-run request annotation"};
    by_default_ = true;
  }
  const json* spec = member(pod_, "spec");
  if (!spec || !spec->is_object()) throw LeaveAlone{"the pod has no spec", true};
  spec_ = spec;
  if (const json* h = member(*spec, "hostIPC"); h && h->is_boolean() && h->get<bool>())
    throw LeaveAlone{"hostIPC: the pod uses the host's /dev/shm, which gpu-run never resizes", true};
  if (array_at(*spec, "containers").empty()) throw LeaveAlone{"the pod has no containers", true};
  for (const char* list : {"containers", "initContainers"})
    for (const json& c : array_at(*spec, list))
      if (!c.is_object() || container_name(c).empty())
        throw LeaveAlone{std::string("malformed pod: spec.") + list + " has an entry without a name", true};
  check_existing_mounts();
  choose_targets();
  for (PodShmTarget& t : targets_) decide_target(t);
}

void PodRequest::read_annotations() {
  const json* meta = member(pod_, "metadata");
  const json* a = meta ? member(*meta, "annotations") : nullptr;
  if (!a || !a->is_object()) return;
  for (const auto& [key, value] : a->items()) {
    if (key.rfind(kAnnotationPrefix, 0) != 0 && key != kCrioShmSizeAnnotation) continue;
    if (!value.is_string()) throw CannotMeet{"annotation " + k8s_shown(key) + ": expected a string"};
    annotations_[key] = value.get<std::string>();
  }
}

void PodRequest::check_existing_mounts() const {
  for (const char* list : {"containers", "initContainers"})
    for (const json& c : array_at(*spec_, list))
      for (const json& m : array_at(c, "volumeMounts")) {
        std::string path = string_at(m, "mountPath");
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        if (path != kShmMountPath) continue;
        const std::string volume = string_at(m, "name");
        if (is_shm_volume_of_ours(*spec_, volume))
          throw LeaveAlone{"already has gpu-run's /dev/shm (volume " + volume + ")"};
        throw LeaveAlone{"container '" + k8s_shown(container_name(c)) + "' already mounts volume '" +
                             k8s_shown(volume) + "' at /dev/shm; gpu-run-webhook left the pod unchanged",
                         true};
      }
}

void PodRequest::choose_targets() {
  if (auto it = annotations_.find(kContainersAnnotation); it != annotations_.end()) {
    if (it->second.size() > kMaxAnnotationBytes)
      throw CannotMeet{std::string(kContainersAnnotation) + ": value of " + std::to_string(it->second.size()) +
                       " bytes is too long"};
    std::set<std::string> named;
    std::string item;
    for (std::size_t i = 0; i <= it->second.size(); ++i) {
      const char ch = i < it->second.size() ? it->second[i] : ',';
      if (ch == ',') {
        if (!item.empty()) named.insert(item);
        item.clear();
      } else if (ch != ' ') {
        item += ch;
      }
    }
    if (named.empty()) throw CannotMeet{std::string(kContainersAnnotation) + ": names no container"};
    for (const char* list : {"containers", "initContainers"}) {
      const json& cs = array_at(*spec_, list);
      for (std::size_t i = 0; i < cs.size(); ++i)
        if (named.erase(container_name(cs[i]))) targets_.push_back({list, i, &cs[i], {}});
    }
    if (!named.empty())
      throw CannotMeet{std::string(kContainersAnnotation) + ": the pod has no container '" + k8s_shown(*named.begin()) +
                       "'"};
    return;
  }
  const json& cs = array_at(*spec_, "containers");
  for (std::size_t i = 0; i < cs.size(); ++i)
    if (container_gpus(cs[i]) > 0) targets_.push_back({"containers", i, &cs[i], {}});
  // A namespace's default sizes its training pods, not every pod that runs there.
  if (targets_.empty() && by_default_)
    throw LeaveAlone{"no container requests nvidia.com/gpu and the pod names no gpu-run request"};
  if (targets_.empty())
    for (std::size_t i = 0; i < cs.size(); ++i) targets_.push_back({"containers", i, &cs[i], {}});
}

void PodRequest::decide_target(PodShmTarget& t) {
  const json& c = *t.container;
  const std::string who = "container '" + k8s_shown(container_name(c)) + "'";
  bool asked_size = false;
  try {
    SpecFacts facts;
    facts.annotations = annotations_;
    for (const json& e : array_at(c, "env"))
      if (const json* v = member(e, "value"); v && v->is_string())
        facts.env[string_at(e, "name")] = v->get<std::string>();
    facts.gpu_devices = container_gpus(c);
    facts.has_ipc_namespace = true;
    // The budget is core's check; under "raise" the patch raises the limit to hold the shm instead.
    if (config_.policy != WebhookPolicy::kRaise) facts.memory_limit = container_memory(c, "limits");
    Config host_config;
    host_config.memory_fraction_max = config_.memory_fraction_max;
    if (namespace_profile_) host_config.default_profile = *namespace_profile_;
    HostFacts host;
    host.cpus = container_cpus(c, config_.default_cpus);
    const ContainerRequest request = container_request({}, facts);
    asked_size = request.shm_size.has_value();
    t.decision = decide_shm(request, facts, host_config, store_, host);
  } catch (const Error& e) {
    throw CannotMeet{who + ": " + pod_words(e.what(), store_)};
  }
  const ShmDecision& d = t.decision;
  if (d.over_budget) throw CannotMeet{who + ": " + over_budget_words(d, asked_size)};
  if (!d.act) throw CannotMeet{who + ": " + pod_words(d.error.empty() ? d.reason : d.error, store_)};
  total_ = total_ + d.size < total_ ? UINT64_MAX : total_ + d.size;
}

std::string PodRequest::over_budget_words(const ShmDecision& d, bool asked_size) {
  // Core's refusal (decide_shm's over_budget), in the pod's words.
  std::string or_less;
  if (!asked_size && d.plan)
    or_less = std::string(", or lower the annotation ") + request_key(RequestKey::kWorkers).annotation + " (now " +
              std::to_string(d.plan->workers) + ") or " + request_key(RequestKey::kBatchSize).annotation + " (now " +
              std::to_string(d.plan->batch_size) + ")";
  else
    or_less = std::string(", or ask for less with ") + request_key(RequestKey::kShmSize).annotation;
  return (asked_size ? "" : "planned ") + std::string("/dev/shm of ") + format_size(d.over_budget->size) + " " +
         d.over_budget->over + ": raise resources.limits.memory to at least " +
         k8s_quantity(d.over_budget->limit_needed) + or_less;
}

}  // namespace gpurun
