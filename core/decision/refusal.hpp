#pragma once

// Why core refuses a size: a value with the numbers, never a sentence in one door's words. Each
// door names its keys (RequestWords: a flag, a container's key, a pod's annotation) and
// refusal_words() makes the one line its users read. The one refusal type: the plan's (sizing,
// engines, the decision) and a resize's (plan_resize, shm/shm_resize.hpp).

#include <cstdint>
#include <string>

namespace gpurun {

enum class RefusalKind {
  kAboveMaxShm,         // the plan's need is above the profile's max_shm
  kOverBudget,          // the size does not fit the memory budget of the memory limit
  kVllmTensorParallel,  // engines.vllm.tensor_parallel_size does not divide the plan's GPUs
  kRayNoMemoryLimit,    // engines.ray's default store is a share of a memory limit the plan lacks
  // A running container's /dev/shm that may not be resized (plan_resize), of `container`:
  kNoShm,             // IPC mode none: no /dev/shm at all
  kHostIpc,           // IPC mode host, or the host's IPC namespace
  kHostShmBound,      // the host's /dev/shm bound in
  kJoinedTwice,       // container:X where X joined another (ipc_owner is X)
  kUnknownIpc,        // an IPC mode gpu-run does not know
  kNotTmpfs,          // /dev/shm is not a tmpfs mount of its own
  kBelowMiB,          // `size` is below 1 MiB
  kBelowUsed,         // `size` is below what /dev/shm holds now (`used` of `current`)
  kResizeOverBudget,  // `size` is over the memory budget of the memory limit, and not forced
};

struct Refusal {
  RefusalKind kind = RefusalKind::kOverBudget;
  bool planned = true;     // the size is the plan's; false: the request's explicit size
  std::uint64_t size = 0;  // kAboveMaxShm: the need; kOverBudget: the size that does not fit; a resize's: the ask
  // The plan's, for the remedy ("lower workers (now 4)"); kVllmTensorParallel: ranks are the GPUs.
  std::string profile;
  unsigned ranks = 1;
  std::uint64_t workers = 0;
  std::uint64_t batch_size = 0;
  std::uint64_t need = 0;          // the plan's need (kOverBudget at min_shm: what the job's terms need)
  std::uint64_t min_shm = 0;       // kOverBudget: at or below it, the job's keys cannot lower the size
  std::uint64_t max_shm = 0;       // kAboveMaxShm
  std::uint64_t memory_limit = 0;  // kOverBudget, kResizeOverBudget: the limit and the share of it shm may take
  double memory_fraction_max = 0.5;
  bool pod_limit = false;             // kOverBudget: the limit is the pod's (the container has none)
  std::uint64_t tensor_parallel = 0;  // kVllmTensorParallel
  double object_store_fraction = 0;   // kRayNoMemoryLimit
  // A resize's: the container as the door names it, the one whose IPC namespace it joined
  // (kJoinedTwice), what its /dev/shm holds now and its size (kBelowUsed).
  std::string container;
  std::string ipc_owner;
  std::uint64_t used = 0;
  std::uint64_t current = 0;
};

// How a door names what a person changes to meet a refusal.
struct RequestWords {
  const char* gpus;                          // "--gpus", "gpus", "gpu-run.gpus"
  const char* workers;                       // "--workers", "workers", "gpu-run.workers"
  const char* batch_size;                    // "--batch-size", "batch-size", "gpu-run.batch-size"
  const char* shm_size;                      // "--shm-size", "shm-size", "gpu-run.shm-size"
  const char* memory_limit;                  // "--memory", "the memory limit", "resources.limits.memory"
  const char* pod_memory_limit;              // the pod's limit when the container has none
  const char* plan_with_limit;               // how to plan with a memory limit (Ray's default store)
  std::string (*size)(std::uint64_t bytes);  // a limit as this door's users write it: "4g", "4Gi"
  // An unknown profile's pointer to the known ones: null for "see 'gpu-run-ctl profiles list'";
  // else the store's own names follow these words (a cluster's users have no gpu-run-ctl).
  const char* known_profiles;
  // Keys named only when they cannot be read (sizing_request): the contract's unless a door says.
  const char* profile = "profile";                  // "--profile", "gpu-run.profile"
  const char* prefetch_factor = "prefetch-factor";  // "--prefetch-factor" (no container key carries it)
  // How to plan for N DataLoader workers, "{n}" standing for N ("pass --workers {n} to gpu-run").
  const char* set_workers = "set GPU_RUN_WORKERS={n}";
  // How to resize past the memory budget (gpu-run-ctl resize, the one door of plan_resize).
  const char* force = "--force";
};

// A container's keys, as the contract names them (the hook, the runtime, the guard).
extern const RequestWords kContainerWords;

// The one line for `refusal` in `words`: what was refused, with the numbers, and what to change.
std::string refusal_words(const Refusal& refusal, const RequestWords& words);

}  // namespace gpurun
