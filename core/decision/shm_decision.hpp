#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "decision/config.hpp"
#include "decision/refusal.hpp"
#include "decision/sizing.hpp"
#include "oci/host.hpp"
#include "oci/oci.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

// Who read a request: a container's keys (annotations, labels, env: the hook, the runtime, the
// webhook, the guard) or a person's flags (gpu-run, gpu-run-ctl). The origin decides only the
// syntax of gpus (Docker's --gpus for flags, a count for a container) and whether a profile may be
// a path (flags only); how a key is named in a message is the request's `words`.
enum class RequestOrigin { kContainer, kFlags };

// What a container asked for, as given, whatever door read it.
struct ContainerRequest {
  std::optional<std::string> profile;
  std::optional<std::string> gpus;
  std::optional<std::string> workers;
  std::optional<std::string> batch_size;
  std::optional<std::string> prefetch_factor;  // flags only: no container key carries it
  std::optional<std::string> shm_size;
  bool over_budget_chosen = false;  // flags only: a person keeps shm_size over the memory budget
  std::string source;               // "annotation", "env", "annotation+env", "flags", "recorded" or "" when none
  // Two different values for one key (its two environment names, or a flag and -e): the one line
  // refusing it; decide_shm refuses the request with it.
  std::string conflict;
  RequestOrigin origin = RequestOrigin::kContainer;
  // How the door that read the request names its keys in a refusal (refusal.hpp).
  const RequestWords* words = &kContainerWords;  // never null
  bool named_anything() const { return profile || gpus || workers || batch_size || prefetch_factor || shm_size; }
  bool named_plan() const { return profile || gpus || workers || batch_size || prefetch_factor; }
};

// Reads the request from state annotations, spec annotations and spec env.
ContainerRequest container_request(const std::map<std::string, std::string>& state_annotations, const SpecFacts& spec);

// Reads what gpu-run recorded in a container it sized (container_env, container_labels): the
// profile, GPUs, workers and batch size its plan used (the node guard re-plans from them).
ContainerRequest recorded_request(const std::map<std::string, std::string>& env,
                                  const std::map<std::string, std::string>& labels);

// The decision for one container's /dev/shm, before looking at its mounts.
struct ShmDecision {
  bool act = false;               // false: leave the container alone
  bool explicit_request = false;  // the container named something (failures fail its start)
  bool size_explicit = false;     // a size was given: apply it even if it shrinks (never in a
                                  // pod's app container: the pod's /dev/shm is shared)
  bool host_ipc = false;          // no ipc namespace: /dev/shm is the host's, never touched
  bool planned = false;           // act, and size is the plan's (not an explicit size)
  std::uint64_t size = 0;
  std::string profile;
  unsigned gpus = 0;
  std::uint64_t workers = 0;
  std::string source;              // annotation | env | default
  std::string reason;              // why not acting, or how the size was found
  std::optional<Error> error;      // set when the request cannot be met: a bad key, an unreadable profile, or
                                   // `refusal` in the request's words; with its errno and exit code
  std::optional<Refusal> refusal;  // set when core refused the size (over the budget, the profile's max_shm)
  bool budget_waived = false;      // refusal is over the budget, and the size applied: over_budget_chosen
  std::optional<ShmPlan> plan;     // the plan, when one could be made (also beside an explicit size)
  // The container's command line starts another number of DataLoader workers than the plan holds
  // (command_line.hpp): the one line a door shows where it sizes, and the flag it read.
  std::string command_warning;
  std::string command_flag;           // the workers flag the command line gives ("-j 8"), if any
  std::uint64_t command_workers = 0;  // and its count
};

// Host facts the decision needs (so tests can fix them).
struct HostFacts {
  unsigned cpus = 1;
  unsigned gpus = 0;  // /dev/nvidiaN on the host
  std::uint64_t mem_total = 0;
  bool gpus_counted = false;  // gpus was counted on the node that runs the container (not a webhook)
  bool guarded = false;       // a guard will grow its /dev/shm (SizingRequest::guarded)
};

// The facts of the host a door runs on, the container's too (the hook, the runtime, gpu-run and
// the ctl commands that plan for this host): `info`'s CPUs and memory, the GPUs under /dev and
// whether the node guard runs (node_guard_runs).
HostFacts node_host_facts(const HostInfo& info);

// The one adapter from a request, whatever door read it, to the planner's input: parses each
// key (bounded; throws Error naming the key), counts GPUs (the request, else
// NVIDIA_VISIBLE_DEVICES, else the spec's devices), whether one reaches the container, the CPUs
// (host, cpuset, quota) and the memory limit (the container's, else its pod's). Pure.
SizingRequest sizing_request(const ContainerRequest& request, const SpecFacts& spec, const HostFacts& host,
                             const Config& config);

// The plan for a request: its profile (the request's, else the config's default_profile, else
// "default") from `store`, planned for sizing_request. No budget is checked. Throws Error.
ShmPlan plan_request(const ContainerRequest& request, const SpecFacts& spec, const Config& config,
                     const ProfileStore& store, const HostFacts& host);

// The one decision, for every door: request + container + config + profiles + host -> what its
// /dev/shm gets. Pure; never throws for bad container input: it sets `error` instead.
//  - nothing asked and no default_profile: leave it;
//  - a container on the host's /dev/shm (--ipc=host, hostIPC, a bind of the host's: uses_host_shm)
//    is left alone (host_ipc) whatever it asked for; `plan` is still set when one can be made;
//  - an explicit size is applied if it is at least 1MiB, fits the host's memory and the memory
//    budget (the same answer at every door); `plan` is set beside it (for a door's warning);
//  - else the plan is applied if it fits the profile's max_shm, the host and the budget.
ShmDecision decide_shm(const ContainerRequest& request, const SpecFacts& spec, const Config& config,
                       const ProfileStore& store, const HostFacts& host);

// key=value summary of a decision for the log.
std::string describe(const ShmDecision& decision);

}  // namespace gpurun
