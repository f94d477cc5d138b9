#include "pod/pod_request.hpp"

#include <set>
#include <utility>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"
#include "decision/sizing.hpp"
#include "oci/oci.hpp"
#include "pod/patch.hpp"
#include "pod/pod_json.hpp"
#include "profiles/profile.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

std::string k8s_limit(std::uint64_t bytes) { return k8s_quantity(bytes); }

// A pod sets annotations and resources: what to change when core refuses a size.
const RequestWords kPodWords = {
    request_key(RequestKey::kGpus).annotation,
    request_key(RequestKey::kWorkers).annotation,
    request_key(RequestKey::kBatchSize).annotation,
    request_key(RequestKey::kShmSize).annotation,
    "resources.limits.memory",
    "resources.limits.memory",
    "plan with resources.limits.memory",
    k8s_limit,
    "profiles this webhook knows",
    request_key(RequestKey::kProfile).annotation,
    "prefetch-factor",
    "annotate the pod gpu-run.workers: \"{n}\"",
};

PodLeftAlone leave_alone(std::string reason, bool warn = false) { return {std::move(reason), warn}; }

}  // namespace

PodRequest::PodRequest(const json& pod, const WebhookConfig& config, const ProfileStore& store,
                       const std::string* namespace_profile)
    : pod_(pod), config_(config), store_(store), namespace_profile_(namespace_profile) {}

std::string PodRequest::default_profile_used() const {
  return namespace_profile_ && !annotations_.count(request_key(RequestKey::kProfile).annotation) ? *namespace_profile_
                                                                                                 : "";
}

std::string PodRequest::target_names() const {
  std::string out;
  for (const PodShmTarget& t : targets_) out += (out.empty() ? "" : ",") + container_name(*t.container);
  return out;
}

std::optional<PodLeftAlone> PodRequest::decide() {
  read_annotations();
  // gpu-run.containers alone says where, not what: nothing is asked.
  if (!has_request_annotation(annotations_)) {
    if (!namespace_profile_) return leave_alone("no gpu-run request annotation");
    by_default_ = true;
  }
  const json* spec = member(pod_, "spec");
  if (!spec || !spec->is_object()) return leave_alone("the pod has no spec", true);
  spec_ = spec;
  if (const json* h = member(*spec, "hostIPC"); h && h->is_boolean() && h->get<bool>())
    return leave_alone("hostIPC: the pod uses the host's /dev/shm, which gpu-run never resizes", true);
  if (array_at(*spec, "containers").empty()) return leave_alone("the pod has no containers", true);
  for (const char* list : {"containers", "initContainers"})
    for (const json& c : array_at(*spec, list))
      if (!c.is_object() || container_name(c).empty())
        return leave_alone(std::string("malformed pod: spec.") + list + " has an entry without a name", true);
  if (auto alone = check_existing_mounts()) return alone;
  if (auto alone = choose_targets()) return alone;
  for (PodShmTarget& t : targets_) decide_target(t);
  return std::nullopt;
}

void PodRequest::read_annotations() {
  const json* meta = member(pod_, "metadata");
  const json* a = meta ? member(*meta, "annotations") : nullptr;
  if (!a || !a->is_object()) return;
  for (const auto& [key, value] : a->items()) {
    if (key.rfind(kAnnotationPrefix, 0) != 0 && key != kCrioShmSizeAnnotation) continue;
    if (!value.is_string()) throw usage_error("annotation " + k8s_shown(key) + ": expected a string");
    annotations_[key] = value.get<std::string>();
  }
}

std::optional<PodLeftAlone> PodRequest::check_existing_mounts() const {
  for (const char* list : {"containers", "initContainers"})
    for (const json& c : array_at(*spec_, list))
      for (const json& m : array_at(c, "volumeMounts")) {
        std::string path = string_at(m, "mountPath");
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        if (path != kShmMountPath) continue;
        const std::string volume = string_at(m, "name");
        if (is_shm_volume_of_ours(*spec_, c, volume))
          return leave_alone("already has gpu-run's /dev/shm (volume " + volume + ")");
        return leave_alone("container '" + k8s_shown(container_name(c)) + "' already mounts volume '" +
                               k8s_shown(volume) + "' at /dev/shm; gpu-run-webhook left the pod unchanged",
                           true);
      }
  return std::nullopt;
}

std::optional<PodLeftAlone> PodRequest::choose_targets() {
  if (auto it = annotations_.find(kContainersAnnotation); it != annotations_.end()) {
    if (it->second.size() > kMaxAnnotationBytes)
      throw usage_error(std::string(kContainersAnnotation) + ": value of " + std::to_string(it->second.size()) +
                        " bytes is too long");
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
    if (named.empty()) throw usage_error(std::string(kContainersAnnotation) + ": names no container");
    for (const char* list : {"containers", "initContainers"}) {
      const json& cs = array_at(*spec_, list);
      for (std::size_t i = 0; i < cs.size(); ++i)
        if (named.erase(container_name(cs[i]))) targets_.push_back({list, i, &cs[i], {}});
    }
    if (!named.empty())
      throw usage_error(std::string(kContainersAnnotation) + ": the pod has no container '" +
                        k8s_shown(*named.begin()) + "'");
    return std::nullopt;
  }
  const json& cs = array_at(*spec_, "containers");
  for (std::size_t i = 0; i < cs.size(); ++i)
    if (container_gpus(cs[i]) > 0) targets_.push_back({"containers", i, &cs[i], {}});
  // A namespace's default sizes its training pods, not every pod that runs there.
  if (targets_.empty() && by_default_)
    return leave_alone("no container requests nvidia.com/gpu and the pod names no gpu-run request");
  if (targets_.empty())
    for (std::size_t i = 0; i < cs.size(); ++i) targets_.push_back({"containers", i, &cs[i], {}});
  return std::nullopt;
}

void PodRequest::decide_target(PodShmTarget& t) {
  const json& c = *t.container;
  const std::string who = "container '" + k8s_shown(container_name(c)) + "'";
  try {
    SpecFacts facts;
    facts.annotations = annotations_;
    for (const json& e : array_at(c, "env"))
      if (const json* v = member(e, "value"); v && v->is_string())
        facts.env[string_at(e, "name")] = v->get<std::string>();
    for (const char* list : {"command", "args"})
      for (const json& a : array_at(c, list))
        if (a.is_string()) facts.args.push_back(a.get<std::string>());
    facts.gpu_devices = container_gpus(c);
    facts.has_ipc_namespace = true;
    // The budget is core's check; under "raise" the patch raises the limit to hold the shm instead.
    if (config_.policy != WebhookPolicy::kRaise) {
      facts.memory_limit = container_memory(c, "limits");
    } else {
      // Only what an engine's share is planned from: a bad quantity is the patch's to name, as it
      // raises the limit (patched_memory).
      try {
        facts.limit_raised_from = container_memory(c, "limits");
      } catch (const Error&) {
      }
    }
    Config host_config;
    host_config.memory_fraction_max = config_.memory_fraction_max;
    if (namespace_profile_) host_config.default_profile = *namespace_profile_;
    HostFacts host;
    host.cpus = container_cpus(c, config_.default_cpus);
    ContainerRequest request = container_request({}, facts);
    request.words = &kPodWords;
    t.decision = decide_shm(request, facts, host_config, store_, host);
  } catch (const Error& e) {
    throw e.with_context(who);
  }
  const ShmDecision& d = t.decision;
  if (!d.act) throw d.error ? d.error->with_context(who) : usage_error(who + ": " + d.reason);
  total_ = total_ + d.size < total_ ? UINT64_MAX : total_ + d.size;
}

}  // namespace gpurun
