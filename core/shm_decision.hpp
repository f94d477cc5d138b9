#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "config.hpp"
#include "oci.hpp"
#include "profile_store.hpp"
#include "sizing.hpp"

namespace gpurun {

// What a container asked for through annotations (which win) and env.
struct ContainerRequest {
  std::optional<std::string> profile;
  std::optional<std::string> gpus;
  std::optional<std::string> workers;
  std::optional<std::string> batch_size;
  std::optional<std::string> shm_size;
  std::string source;  // "annotation", "env", "annotation+env" or "" when none
  bool named_anything() const { return profile || gpus || workers || batch_size || shm_size; }
};

// Reads the request from state annotations, spec annotations and spec env.
ContainerRequest container_request(const std::map<std::string, std::string>& state_annotations, const SpecFacts& spec);

// The decision for one container's /dev/shm, before looking at its mounts.
struct ShmDecision {
  bool act = false;               // false: leave the container alone
  bool explicit_request = false;  // the container named something (failures fail its start)
  bool size_explicit = false;     // a size was given: apply it even if it shrinks (never in a
                                  // pod's app container: the pod's /dev/shm is shared)
  bool host_ipc = false;          // no ipc namespace: /dev/shm is the host's, never touched
  std::uint64_t size = 0;
  std::string profile;
  unsigned gpus = 0;
  std::uint64_t workers = 0;
  std::string source;  // annotation | env | default
  std::string reason;  // why not acting, or how the size was found
  std::string error;   // set when the request cannot be met
  std::optional<ShmPlan> plan;
};

// Host facts the decision needs (so tests can fix them).
struct HostFacts {
  unsigned cpus = 1;
  unsigned gpus = 0;  // /dev/nvidiaN on the host
  std::uint64_t mem_total = 0;
  bool gpus_counted = false;  // gpus was counted on the node that runs the container (not a webhook)
};

// Pure: request + spec + config + profiles -> decision. Never throws for bad
// container input: it sets `error` instead. A container on the host's /dev/shm (--ipc=host,
// hostIPC: uses_host_shm) is left alone (host_ipc) whatever it asked for.
ShmDecision decide_shm(const ContainerRequest& request, const SpecFacts& spec, const Config& config,
                       const ProfileStore& store, const HostFacts& host);

// key=value summary of a decision for the log.
std::string describe(const ShmDecision& decision);

}  // namespace gpurun
