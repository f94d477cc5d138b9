#pragma once

// Which running containers the node guard takes, and how far each may grow: one admission
// step for every engine (Docker, podman, containerd), over what a door recorded (decision_record.hpp).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/or_why.hpp"
#include "decision/config.hpp"
#include "decision/decision_record.hpp"
#include "decision/growth_limits.hpp"
#include "decision/sizing.hpp"
#include "oci/container.hpp"
#include "profiles/profile.hpp"

namespace gpurun {

// What the guard needs to admit a container: the host's config and profiles, where the hook
// writes its records (empty: none read), the host's memory (the most any headroom may ask
// for) and whether every container is guarded (--all), not only those gpu-run sized.
struct AdmissionContext {
  Config config;
  std::function<Profile(const std::string&)> load_profile;
  fs::path decision_dir;
  std::uint64_t host_memory = 0;
  bool all = false;
};

// A container the guard takes: its limits, the note for the line that starts guarding it, and
// the profile its metrics are labelled with.
struct Admitted {
  ContainerInfo info;
  GuardLimits limits;
  std::string note;
  std::string profile;
};

// The one admission step: no value, and why (for the "not guarding" line), when the
// container is not running, has no /dev/shm of its own to grow, or (without --all) gpu-run did
// not size it: no record and none of the old keys (a gpu-run.profile or gpu-run.shm-size label,
// annotation or GPU_RUN_PROFILE / GPU_RUN_SHM_SIZE in its environment).
OrWhy<Admitted> admit(ContainerInfo container, const AdmissionContext& context);

// The container, when the guard may take it, as admit() decides it; else why it is passed over
// (not running, no /dev/shm of its own, not sized by gpu-run without `all`).
OrWhy<ContainerInfo> guardable(ContainerInfo container, bool all, const Recorded& recorded);
OrWhy<ContainerInfo> guardable(ContainerInfo container, bool all);

// What the plan knows of a container sized before the decision record existed, from its old
// GPU_RUN_* keys (recorded_request): profile, workers and batch size per rank, and the GPUs
// (ranks; 0: one rank); nullopt unless the first three are there and every one given is a count.
struct GuardPlanInputs {
  std::string profile;
  std::uint64_t workers = 0;
  std::uint64_t batch_size = 0;
  unsigned gpus = 0;
  SizingRequest request;  // core's sizing_request of the recorded request (recorded_request)
};
std::optional<GuardPlanInputs> guard_plan_inputs(const ContainerInfo& container, const Config& config = Config{});

// The limits of a container's growth. With a decision record: guard_limits_of_record, the
// guard's own limits being the memory budget of its limit, the max_shm of the profile of that
// name in the host's store (when it loads) and an emptyDir's sizeLimit. With only the old keys,
// as before the record: the plan's limits, re-planned from them; otherwise (or when the profile
// cannot be loaded or planned) no headroom (the policy's fraction) and the memory budget.
// `note` says which.
GuardLimits container_guard_limits(const ContainerInfo& container, const Recorded& recorded,
                                   const AdmissionContext& context, std::string* note);
GuardLimits container_guard_limits(const ContainerInfo& container, const Config& config,
                                   const std::function<Profile(const std::string&)>& load_profile, std::string* note);

}  // namespace gpurun
