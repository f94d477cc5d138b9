#pragma once

// What the doors that get an OCI container (gpu-run-hook, and gpu-run-runtime, also as
// containerd's runtime handler) share: the context a decision is made in, the plan for one
// container, and the disposition that turns a decision into act / leave / skip / fail. The
// other doors (gpu-run, resize, the guard, the webhook) call shm_decision.hpp themselves and act
// their own way. docs/ARCHITECTURE.md, "The decision context and the disposition".

#include <functional>
#include <map>
#include <string>

#include "base/log.hpp"
#include "decision/config.hpp"
#include "decision/shm_decision.hpp"
#include "oci/oci.hpp"
#include "profiles/profile_store.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {

// Loaded once per invocation: the host config, its log, and the profile store (the host's
// directories only: a container never reaches a user's profiles).
struct DecisionContext {
  DecisionContext(const fs::path& config_file, const char* program);

  fs::path config_file;
  Config config;
  Logger log;
  ProfileStore store;
};

// The host as the decision sees it: CPUs, GPUs, memory. Probed (reads /proc, cgroups, /dev); a
// kernel file that is there but cannot be read is a warning in `log` (HostInfo::unread).
HostFacts probe_host_facts(const Logger& log);

// The memory limit of the pod a container belongs to, for a pod's container (sandbox or app)
// whose spec has no limit of its own: kubelet puts the pod's limit on the pod's cgroup, the
// parent of the spec's linux.cgroupsPath, and the pod's tmpfs pages count against it. Probed
// (reads /sys/fs/cgroup, see probe_parent_memory_limit); nullopt otherwise.
std::optional<std::uint64_t> probe_pod_memory_limit(const SpecFacts& spec);

// What a door does with a decision.
enum class Action {
  kAct,    // apply decision.size
  kLeave,  // nothing to do (nothing asked, or the host's /dev/shm)
  kSkip,   // could not be met, but the container did not insist: start it unchanged
  kFail,   // could not be met and the container (or on_error=fail) insists: fail its start
};

struct Disposition {
  Action action = Action::kLeave;
  LogLevel level = LogLevel::kDebug;  // of the door's log line
  std::string fields;                 // "action=... source=... reason=..." for that line (empty for
                                      // kAct: the door logs what acting did)
  std::string error;                  // kFail: why, one line for the engine's error message
  int errno_value = 0;                // kFail: the failure's errno, kept for the door (0: none)
};

// The policy every door applies: a failure fails the start when the container asked
// explicitly or the config says on_error=fail, else it is skipped with a warning. Pure.
Disposition dispose(const ShmDecision& decision, const Config& config);

// A failure after the decision (no pid, a remount refused, a spec that cannot be read),
// under the same policy. `explicit_request`: the container asked for gpu-run. Pure.
Disposition dispose_failure(const std::string& message, bool explicit_request, const Config& config);

// The plan for one container, from its OCI state annotations (the hook has them; the
// runtime has none) and its spec. `host` is called only when the host matters, and then, for a
// pod's container without a limit of its own, the pod's limit is read (probe_pod_memory_limit)
// unless `spec` already carries it.
struct ContainerPlan {
  ContainerRequest request;
  ShmDecision decision;
  Disposition disposition;
};
ContainerPlan plan_container(const std::map<std::string, std::string>& state_annotations, const SpecFacts& spec,
                             const Config& config, const ProfileStore& store, const std::function<HostFacts()>& host);

// The log fields of a /dev/shm a door acted on: "action=<outcome> <decision> before=S after=S",
// and the reason when it was the host's (left alone). One format for the hook and the runtime.
std::string result_fields(const ShmDecision& decision, const ShmResult& result);

// Writes the disposition's log line: "<who> <fields>" at its level.
void log_disposition(const Logger& log, const std::string& who, const Disposition& disposition);

}  // namespace gpurun
