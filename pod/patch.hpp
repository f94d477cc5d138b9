#pragma once

// The JSONPatch (RFC 6902) that gives a pod's target containers gpu-run's memory-backed
// /dev/shm: the volume, its mounts, the contract's env and, under the "raise" policy, memory
// limits and requests raised by each container's shm.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decision_record.hpp"
#include "pod_request.hpp"
#include "webhook_config.hpp"

namespace gpurun {

inline constexpr const char* kShmMountPath = "/dev/shm";
// The volume the webhook adds (a suffix -2, -3, ... when the pod has one of that name).
inline constexpr const char* kShmVolumeName = "gpu-run-shm";

// The patch ops for the pod whose spec is `spec`: one volume of `total` bytes mounted in each
// of `targets`, and `record` (pod_decision) in each one's kEnvDecision. Throws CannotMeet when a
// target's memory cannot be raised (a bad quantity).
nlohmann::json shm_patch(const nlohmann::json& spec, const std::vector<PodShmTarget>& targets, std::uint64_t total,
                         const WebhookConfig& config, const DecisionRecord& record);

// The sizeLimit of the pod's emptyDir: the sum of each target's growth ceiling (the profile's
// max_shm, the budget of its memory limit as patched). Throws CannotMeet for a bad quantity.
std::uint64_t pod_size_limit(const std::vector<PodShmTarget>& targets, const WebhookConfig& config);

// The pod's decision record (decision_record.hpp): its one /dev/shm of `total` bytes, grown at
// most to `size_limit`, and its targets' plans summed (need, headroom, workers, GPUs; their
// profiles named, comma-separated). `door`: gpu-run-webhook or gpu-run-ctl k8s.
DecisionRecord pod_decision(const std::vector<PodShmTarget>& targets, std::uint64_t total, std::uint64_t size_limit,
                            const std::string& door);

// The patch op that sets the pod's annotation kDecisionKey to `record`, replacing any it carried.
nlohmann::json decision_annotation_op(const nlohmann::json& pod, const DecisionRecord& record);

// True when `volume` in `spec` is one shm_patch added: gpu-run-shm[-N], an emptyDir in memory.
bool is_shm_volume_of_ours(const nlohmann::json& spec, const std::string& volume);

}  // namespace gpurun
