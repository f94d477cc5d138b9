#pragma once

// The JSONPatch (RFC 6902) that gives a pod's target containers gpu-run's memory-backed
// /dev/shm: the volume, its mounts, the contract's env and, under the "raise" policy, memory
// limits and requests raised by each container's shm.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decision/decision_record.hpp"
#include "pod/pod_request.hpp"
#include "pod/webhook_config.hpp"

namespace gpurun {

inline constexpr const char* kShmMountPath = "/dev/shm";
// The volume the webhook and gpu-run-ctl k8s add (a suffix -2, -3, ... when the pod has one of
// that name).
inline constexpr const char* kShmVolumeName = "gpu-run-shm";
// The volume gpu-run-ctl k8s wrote before it went through the webhook's review (before 326112e),
// read as ours only beside the GPU_RUN_SHM_LIMIT env it wrote with it: "dshm" is also the name
// people give their own.
inline constexpr const char* kOldShmVolumeName = "dshm";

// The patch ops for the pod whose spec is `spec`: one volume of `total` bytes mounted in each
// of `targets`, and `record` (pod_decision) in each one's kEnvDecision. Throws Error naming the
// container when its memory cannot be raised (a bad quantity).
nlohmann::json shm_patch(const nlohmann::json& spec, const std::vector<PodShmTarget>& targets, std::uint64_t total,
                         const WebhookConfig& config, const DecisionRecord& record);

// The sizeLimit of the pod's emptyDir: the sum of each target's growth ceiling (the profile's
// max_shm, the budget of its memory limit as patched). Throws Error for a bad quantity.
std::uint64_t pod_size_limit(const std::vector<PodShmTarget>& targets, const WebhookConfig& config);

// The pod's decision record (decision_record.hpp): its one /dev/shm of `total` bytes, grown at
// most to `size_limit`, and its targets' plans summed (need, headroom, workers, GPUs; their
// profiles named, comma-separated). `door`: gpu-run-webhook or gpu-run-ctl k8s.
DecisionRecord pod_decision(const std::vector<PodShmTarget>& targets, std::uint64_t total, std::uint64_t size_limit,
                            const std::string& door);

// The patch op that sets the pod's annotation kDecisionKey to `record`, replacing any it carried.
nlohmann::json decision_annotation_op(const nlohmann::json& pod, const DecisionRecord& record);

// True when `volume`, mounted at /dev/shm in `container` of the pod whose spec is `spec`, is
// gpu-run's: an emptyDir in memory named gpu-run-shm[-N], or dshm in a container with
// GPU_RUN_SHM_LIMIT (an older gpu-run-ctl k8s's).
bool is_shm_volume_of_ours(const nlohmann::json& spec, const nlohmann::json& container, const std::string& volume);

}  // namespace gpurun
