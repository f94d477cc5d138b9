#include "door/door.hpp"

#include "base/units.hpp"
#include "decision/contract.hpp"
#include "oci/host.hpp"

namespace gpurun {

DecisionContext::DecisionContext(const fs::path& file, const char* program)
    : config_file(file),
      config(load_config(file)),
      log(config.log_file.string(), parse_log_level(config.log_level), program),
      store(container_profile_search_path(config.profile_dirs)) {}

HostFacts probe_host_facts(const Logger& log) {
  const HostInfo info = probe_host();
  for (const std::string& why : info.unread) log.warn("action=warn host_probe=" + log_quote(why));
  return node_host_facts(info);
}

std::optional<std::uint64_t> probe_pod_memory_limit(const SpecFacts& spec) {
  if (spec.memory_limit || !spec.cgroups_path || !is_pod_container(spec.annotations)) return std::nullopt;
  return probe_parent_memory_limit(*spec.cgroups_path);
}

namespace {

// Fail or skip, by the one policy; `fields` follow the action on the log line.
Disposition fail_or_skip(const std::string& message, int errno_value, bool explicit_request, const Config& config,
                         const std::string& fields) {
  const bool must_fail = explicit_request || config.on_error == OnError::kFail;
  Disposition out;
  out.action = must_fail ? Action::kFail : Action::kSkip;
  out.level = must_fail ? LogLevel::kError : LogLevel::kWarn;
  out.fields = std::string("action=") + (must_fail ? "fail " : "skip ") + fields;
  if (must_fail) {
    out.error = message;
    out.errno_value = errno_value;
  }
  return out;
}

}  // namespace

Disposition dispose_failure(const std::string& message, bool explicit_request, const Config& config) {
  return fail_or_skip(message, 0, explicit_request, config, "error=" + log_quote(message));
}

Disposition dispose(const ShmDecision& d, const Config& config) {
  if (d.error) return fail_or_skip(d.error->what(), d.error->errno_value(), d.explicit_request, config, describe(d));
  Disposition out;
  if (d.act) {
    // The door logs what acting did (resized, spec-size, ...): no line to build here.
    out.action = Action::kAct;
    out.level = LogLevel::kInfo;
    return out;
  }
  out.action = Action::kLeave;
  // Leaving a container that asked for something (or would get the default) is worth a
  // line at info; leaving one that asked for nothing is not.
  out.level = d.host_ipc ? LogLevel::kInfo : LogLevel::kDebug;
  out.fields = d.host_ipc ? "action=leave reason=" + log_quote(d.reason) : "action=leave " + describe(d);
  return out;
}

ContainerPlan plan_container(const std::map<std::string, std::string>& state_annotations, const SpecFacts& spec,
                             const Config& config, const ProfileStore& store, const std::function<HostFacts()>& host) {
  ContainerPlan p;
  p.request = container_request(state_annotations, spec);
  // The host is probed only when the decision will read it.
  const bool needs_host = (p.request.named_anything() || config.default_profile) && !uses_host_shm(spec);
  if (!needs_host) {
    p.decision = decide_shm(p.request, spec, config, store, HostFacts{});
  } else {
    // So is the pod's cgroup, for a pod's container without a memory limit of its own.
    SpecFacts with_pod = spec;
    if (!with_pod.pod_memory_limit) with_pod.pod_memory_limit = probe_pod_memory_limit(spec);
    p.decision = decide_shm(p.request, with_pod, config, store, host());
  }
  p.disposition = dispose(p.decision, config);
  return p;
}

void log_disposition(const Logger& log, const std::string& who, const Disposition& disposition) {
  log.log(disposition.level, who + " " + disposition.fields);
}

std::string result_fields(const ShmDecision& d, const ShmResult& r) {
  return std::string("action=") + outcome_name(r.outcome) + " " + describe(d) + " before=" + log_size(r.before) +
         " after=" + log_size(r.after) +
         (r.outcome == ShmOutcome::kHostShm ? " reason=" + log_quote("the host's /dev/shm is never resized") : "");
}

}  // namespace gpurun
