#include "review.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "config.hpp"
#include "contract.hpp"
#include "error.hpp"
#include "k8s_quantity.hpp"
#include "log.hpp"
#include "oci.hpp"
#include "profile.hpp"
#include "shm_decision.hpp"
#include "sizing.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxUidBytes = 256;
constexpr const char* kShmPath = "/dev/shm";
constexpr const char* kGpuResource = "nvidia.com/gpu";

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string string_at(const json& j, const char* key) {
  const json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

// A resource quantity as the API writes it (a string; a number from a hand-written review).
std::optional<std::string> resource(const json& container, const char* section, const char* name) {
  const json* r = member(container, "resources");
  const json* s = r ? member(*r, section) : nullptr;
  const json* v = s ? member(*s, name) : nullptr;
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_unsigned()) return std::to_string(v->get<std::uint64_t>());
  throw usage_error(std::string("resources.") + section + "." + name + ": expected a quantity string");
}

std::string container_name(const json& c) { return string_at(c, "name"); }

unsigned container_gpus(const json& c) {
  std::optional<std::string> q = resource(c, "limits", kGpuResource);
  if (!q) q = resource(c, "requests", kGpuResource);
  return q ? static_cast<unsigned>(parse_count(*q, "nvidia.com/gpu", 1024)) : 0;
}

unsigned container_cpus(const json& c, unsigned fallback) {
  std::optional<std::string> q = resource(c, "limits", "cpu");
  if (!q) q = resource(c, "requests", "cpu");
  return q ? parse_k8s_cpus(*q, "container '" + k8s_shown(container_name(c)) + "' cpu") : fallback;
}

std::optional<std::uint64_t> memory_of(const json& c, const char* section) {
  std::optional<std::string> q = resource(c, section, "memory");
  if (!q) return std::nullopt;
  return parse_k8s_quantity(*q, "container '" + k8s_shown(container_name(c)) + "' " + section + ".memory");
}

const json& array_at(const json& j, const char* key) {
  static const json empty = json::array();
  const json* v = member(j, key);
  return v && v->is_array() ? *v : empty;
}

// One container the webhook gives /dev/shm, with its decision.
struct Target {
  std::string list;  // "containers" | "initContainers"
  std::size_t index = 0;
  const json* container = nullptr;
  ShmDecision decision;
};

std::string pointer(const Target& t) { return "/spec/" + t.list + "/" + std::to_string(t.index); }

// Adds `value` to the array at `path` (creating the array when `existing` is not one).
void append(json& ops, const std::string& path, const json* existing, json value) {
  if (existing && existing->is_array())
    ops.push_back({{"op", "add"}, {"path", path + "/-"}, {"value", std::move(value)}});
  else
    ops.push_back({{"op", "add"}, {"path", path}, {"value", json::array({std::move(value)})}});
}

constexpr std::size_t kKnownProfilesShown = 20;

// Core's messages name gpu-run's flags; a pod sets the annotations of the same names. Its
// "unknown profile" points at gpu-run-ctl, which a cluster's users do not have: the names this
// webhook knows instead.
std::string pod_words(std::string message, const ProfileStore& store) {
  for (const auto& [flag, annotation] :
       {std::pair<const char*, const char*>{"--workers", "gpu-run.workers"}, {"--batch-size", "gpu-run.batch-size"}})
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

// Thrown for a pod the webhook leaves alone: allowed, no patch, maybe a warning.
struct LeaveAlone {
  std::string reason;
  bool warn = false;
};

// Thrown for a pod whose request cannot be met: the policy decides.
struct CannotMeet {
  std::string reason;
};

class PodReview {
 public:
  // `namespace_profile`: the config's default profile for the pod's namespace, or null.
  PodReview(const json& pod, const WebhookConfig& config, const ProfileStore& store,
            const std::string* namespace_profile)
      : pod_(pod), config_(config), store_(store), namespace_profile_(namespace_profile) {}

  // The JSONPatch; throws LeaveAlone or CannotMeet.
  json patch() {
    try {
      return make_patch();
    } catch (const Error& e) {
      throw CannotMeet{e.what()};
    }
  }

  std::uint64_t total() const { return total_; }
  // The pod asked nothing itself: only its namespace's default profile applies.
  bool by_namespace_default() const { return by_default_; }
  // The namespace's default profile when the pod names no profile (for the log), else "".
  std::string default_profile_used() const {
    return namespace_profile_ && !annotations_.count(request_key(RequestKey::kProfile).annotation) ? *namespace_profile_
                                                                                                   : "";
  }
  std::string target_names() const {
    std::string out;
    for (const Target& t : targets_) out += (out.empty() ? "" : ",") + container_name(*t.container);
    return out;
  }

 private:
  json make_patch() {
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
    for (Target& t : targets_) decide(t);
    return build();
  }

  void read_annotations() {
    const json* meta = member(pod_, "metadata");
    const json* a = meta ? member(*meta, "annotations") : nullptr;
    if (!a || !a->is_object()) return;
    for (const auto& [key, value] : a->items()) {
      if (key.rfind(kAnnotationPrefix, 0) != 0 && key != kCrioShmSizeAnnotation) continue;
      if (!value.is_string()) throw CannotMeet{"annotation " + k8s_shown(key) + ": expected a string"};
      annotations_[key] = value.get<std::string>();
    }
  }

  void check_existing_mounts() const {
    for (const char* list : {"containers", "initContainers"})
      for (const json& c : array_at(*spec_, list))
        for (const json& m : array_at(c, "volumeMounts")) {
          std::string path = string_at(m, "mountPath");
          while (path.size() > 1 && path.back() == '/') path.pop_back();
          if (path != kShmPath) continue;
          const std::string volume = string_at(m, "name");
          if (is_ours(volume)) throw LeaveAlone{"already has gpu-run's /dev/shm (volume " + volume + ")"};
          throw LeaveAlone{"container '" + k8s_shown(container_name(c)) + "' already mounts volume '" +
                               k8s_shown(volume) + "' at /dev/shm; gpu-run-webhook left the pod unchanged",
                           true};
        }
  }

  // A volume this webhook added: gpu-run-shm[-N], an emptyDir in memory.
  bool is_ours(const std::string& volume) const {
    if (volume.rfind(kShmVolumeName, 0) != 0) return false;
    for (const json& v : array_at(*spec_, "volumes"))
      if (string_at(v, "name") == volume) {
        const json* e = member(v, "emptyDir");
        return e && string_at(*e, "medium") == "Memory";
      }
    return false;
  }

  void choose_targets() {
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
        throw CannotMeet{std::string(kContainersAnnotation) + ": the pod has no container '" +
                         k8s_shown(*named.begin()) + "'"};
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

  void decide(Target& t) {
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
      // The budget is core's check; under "raise" the limit is raised to hold the shm instead.
      if (config_.policy != WebhookPolicy::kRaise) facts.memory_limit = memory_of(c, "limits");
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
    if (d.over_budget)
      throw CannotMeet{who + ": " + (asked_size ? "" : "planned ") + "/dev/shm of " + format_size(d.over_budget->size) +
                       " " + d.over_budget->over + ": raise resources.limits.memory to at least " +
                       k8s_quantity(d.over_budget->limit_needed) +
                       (!asked_size && d.plan
                            ? ", or lower the annotation gpu-run.workers (now " + std::to_string(d.plan->workers) +
                                  ") or gpu-run.batch-size (now " + std::to_string(d.plan->batch_size) + ")"
                            : ", or ask for less with gpu-run.shm-size")};
    if (!d.act) throw CannotMeet{who + ": " + pod_words(d.error.empty() ? d.reason : d.error, store_)};
    total_ = total_ + d.size < total_ ? UINT64_MAX : total_ + d.size;
  }

  std::string volume_name() const {
    std::set<std::string> names;
    for (const json& v : array_at(*spec_, "volumes")) names.insert(string_at(v, "name"));
    std::string name = kShmVolumeName;
    for (unsigned n = 2; names.count(name); ++n) name = std::string(kShmVolumeName) + "-" + std::to_string(n);
    return name;
  }

  json build() const {
    json ops = json::array();
    const std::string volume = volume_name();
    append(ops, "/spec/volumes", member(*spec_, "volumes"),
           {{"name", volume}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", k8s_quantity(total_)}}}});
    for (const Target& t : targets_) {
      const json& c = *t.container;
      const std::string base = pointer(t);
      append(ops, base + "/volumeMounts", member(c, "volumeMounts"), {{"name", volume}, {"mountPath", kShmPath}});
      add_env(ops, t);
      if (config_.policy == WebhookPolicy::kRaise) raise_memory(ops, t);
    }
    return ops;
  }

  void add_env(json& ops, const Target& t) const {
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
  void raise_memory(json& ops, const Target& t) const {
    const std::uint64_t shm = t.decision.size;
    const std::string who = "container '" + k8s_shown(container_name(*t.container)) + "'";
    try {
      for (const char* section : {"limits", "requests"}) {
        const std::optional<std::uint64_t> old = memory_of(*t.container, section);
        if (!old) continue;
        std::uint64_t raised = *old + shm;
        const MemoryBudget budget{raised, config_.memory_fraction_max};
        if (std::string(section) == "limits" && !budget.holds(shm)) raised = budget.limit_for(shm);
        ops.push_back({{"op", "replace"},
                       {"path", pointer(t) + "/resources/" + section + "/memory"},
                       {"value", k8s_quantity(raised)}});
      }
    } catch (const Error& e) {
      throw CannotMeet{who + ": " + e.what()};
    }
  }

  const json& pod_;
  const WebhookConfig& config_;
  const ProfileStore& store_;
  const std::string* namespace_profile_;
  bool by_default_ = false;
  const json* spec_ = nullptr;
  std::map<std::string, std::string> annotations_;
  std::vector<Target> targets_;
  std::uint64_t total_ = 0;
};

std::string pod_label(const json& pod) {
  const json* meta = member(pod, "metadata");
  if (!meta) return "";
  std::string name = string_at(*meta, "name");
  if (name.empty()) name = string_at(*meta, "generateName");
  return k8s_shown(name);
}

}  // namespace

std::string base64_encode(const std::string& data) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) | (static_cast<unsigned char>(data[i + 1]) << 8) |
                       static_cast<unsigned char>(data[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i < data.size()) {
    unsigned v = static_cast<unsigned char>(data[i]) << 16;
    if (i + 1 < data.size()) v |= static_cast<unsigned char>(data[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < data.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

WebhookConfig parse_webhook_config(const std::string& text, const std::string& source) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw usage_error(source + ": expected a JSON object");
  WebhookConfig c;
  for (const auto& [key, value] : j.items()) {
    const std::string where = source + ": " + key;
    if (key == "policy") {
      const std::string p = value.is_string() ? value.get<std::string>() : "";
      if (p == "raise")
        c.policy = WebhookPolicy::kRaise;
      else if (p == "deny")
        c.policy = WebhookPolicy::kDeny;
      else if (p == "warn")
        c.policy = WebhookPolicy::kWarn;
      else
        throw usage_error(where + ": expected \"raise\", \"deny\" or \"warn\"");
    } else if (key == "memory_fraction_max") {
      if (!value.is_number() || value.get<double>() <= 0 || value.get<double>() > 1)
        throw usage_error(where + ": expected a number in (0, 1]");
      c.memory_fraction_max = value.get<double>();
    } else if (key == "profile_dirs") {
      if (!value.is_array()) throw usage_error(where + ": expected an array of directories");
      for (const json& d : value) {
        if (!d.is_string()) throw usage_error(where + ": expected an array of directories");
        c.profile_dirs.emplace_back(d.get<std::string>());
      }
    } else if (key == "default_cpus") {
      if (!value.is_number_unsigned() || value.get<std::uint64_t>() == 0 || value.get<std::uint64_t>() > 65536)
        throw usage_error(where + ": expected a whole number of CPUs, at least 1");
      c.default_cpus = value.get<unsigned>();
    } else if (key == "namespace_profiles") {
      if (!value.is_object()) throw usage_error(where + ": expected an object of namespace: profile name");
      for (const auto& [ns, profile] : value.items()) {
        if (!is_k8s_dns_label(ns))
          throw usage_error(where + ": '" + k8s_shown(ns) +
                            "' is not a namespace name (lowercase letters, digits and '-', at most 63)");
        if (!profile.is_string() || !is_valid_profile_name(profile.get<std::string>()))
          throw usage_error(where + "." + ns + ": expected a profile name ([team/]name, lowercase), not a path");
        c.namespace_profiles[ns] = profile.get<std::string>();
      }
    } else {
      throw usage_error(where +
                        ": unknown key (known: policy, memory_fraction_max, profile_dirs, default_cpus, "
                        "namespace_profiles)");
    }
  }
  return c;
}

ReviewResult review_admission(const std::string& body, const WebhookConfig& config, const ProfileStore& store) {
  std::string uid;
  std::string api_version = "admission.k8s.io/v1";
  std::string where;  // namespace/pod for the log
  json response = {{"allowed", true}};
  ReviewResult r;
  auto finish = [&](const std::string& outcome, const std::string& reason) {
    response["uid"] = uid;
    r.review = {{"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"response", response}};
    r.outcome = outcome;
    r.fields = "uid=" + log_quote(uid) + (where.empty() ? "" : " pod=" + log_quote(where)) + " outcome=" + outcome +
               r.fields + (reason.empty() ? "" : " reason=" + log_quote(reason));
    return r;
  };
  auto warn = [&](const std::string& message) { response["warnings"] = json::array({"gpu-run: " + message}); };
  try {
    const json in = json::parse(body, nullptr, false);
    if (in.is_discarded()) {
      warn("malformed AdmissionReview: not JSON");
      return finish("error", "malformed JSON");
    }
    const json* request = member(in, "request");
    if (!request || !request->is_object()) {
      warn("malformed AdmissionReview: no request");
      return finish("error", "no request");
    }
    if (string_at(in, "apiVersion") == "admission.k8s.io/v1beta1") api_version = "admission.k8s.io/v1beta1";
    uid = string_at(*request, "uid");
    if (uid.size() > kMaxUidBytes) {
      uid.clear();
      warn("malformed AdmissionReview: request.uid is too long");
      return finish("error", "uid too long");
    }
    where = string_at(*request, "namespace");
    const json* kind = member(*request, "kind");
    if (!kind || string_at(*kind, "kind") != "Pod" || !string_at(*kind, "group").empty())
      return finish("allowed", "not a Pod");
    if (const json* op = member(*request, "operation"); op && op->is_string() && *op != "CREATE")
      return finish("allowed", "operation " + k8s_shown(op->get<std::string>()) + ": only CREATE is changed");
    if (!string_at(*request, "subResource").empty()) return finish("allowed", "a subresource");
    const json* pod = member(*request, "object");
    if (!pod || !pod->is_object()) {
      warn("malformed AdmissionReview: request.object is not a Pod");
      return finish("error", "no object");
    }
    const auto ns_default = config.namespace_profiles.find(where);
    where += "/" + pod_label(*pod);
    PodReview review(*pod, config, store,
                     ns_default == config.namespace_profiles.end() ? nullptr : &ns_default->second);
    try {
      const json ops = review.patch();
      response["patchType"] = "JSONPatch";
      response["patch"] = base64_encode(ops.dump());
      r.fields = " size=" + k8s_quantity(review.total()) + " containers=" + log_quote(review.target_names());
      if (const std::string used = review.default_profile_used(); !used.empty())
        r.fields += " namespace_profile=" + log_quote(used);
      return finish("patched", "");
    } catch (const LeaveAlone& leave) {
      if (leave.warn) warn(leave.reason);
      return finish(leave.warn ? "warned" : "allowed", leave.reason);
    } catch (const CannotMeet& cannot) {
      // A pod that asked nothing is never denied for its namespace's default (as a host's
      // default_profile is skipped with a warning, never failed, by default).
      if (config.policy == WebhookPolicy::kWarn || review.by_namespace_default()) {
        warn(cannot.reason + "; the pod was admitted without a /dev/shm change");
        return finish("warned", cannot.reason);
      }
      response["allowed"] = false;
      response["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", "gpu-run: " + cannot.reason}};
      return finish("denied", cannot.reason);
    }
  } catch (const std::exception& e) {
    response = {{"allowed", true}};
    warn(std::string("could not review the pod: ") + e.what());
    r.fields.clear();
    return finish("error", e.what());
  }
}

}  // namespace gpurun
