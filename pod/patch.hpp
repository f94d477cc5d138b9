#pragma once

// The JSONPatch (RFC 6902) that gives a pod's target containers gpu-run's memory-backed
// /dev/shm: the volume, its mounts, the contract's env and, under the "raise" policy, memory
// limits and requests raised by each container's shm.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pod_request.hpp"
#include "webhook_config.hpp"

namespace gpurun {

inline constexpr const char* kShmMountPath = "/dev/shm";
// The volume the webhook adds (a suffix -2, -3, ... when the pod has one of that name).
inline constexpr const char* kShmVolumeName = "gpu-run-shm";

// The patch ops for the pod whose spec is `spec`: one volume of `total` bytes mounted in each
// of `targets`. Throws CannotMeet when a target's memory cannot be raised (a bad quantity).
nlohmann::json shm_patch(const nlohmann::json& spec, const std::vector<ShmTarget>& targets, std::uint64_t total,
                         const WebhookConfig& config);

// True when `volume` in `spec` is one shm_patch added: gpu-run-shm[-N], an emptyDir in memory.
bool is_shm_volume_of_ours(const nlohmann::json& spec, const std::string& volume);

}  // namespace gpurun
