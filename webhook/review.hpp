#pragma once

// gpu-run-webhook's decision: an AdmissionReview for a Pod in, the AdmissionReview response
// out, with a JSONPatch that gives the pod a memory-backed /dev/shm of the planned size.
// Pure over its inputs (the profile store reads profile files by name, nothing else).
// docs/ARCHITECTURE.md, "The doors" (the webhook row).

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profile_store.hpp"

namespace gpurun {

// What the webhook does with a plan it cannot apply as it is.
enum class WebhookPolicy {
  kRaise,  // raise the memory limit and request by the shm size (so the budget holds); a
           // request that cannot be planned at all is denied
  kDeny,   // deny the pod with a message saying what to change
  kWarn,   // admit it unchanged with a warning
};

// The webhook's config file (--config, JSON): {"policy": "raise"|"deny"|"warn",
// "memory_fraction_max": 0.5, "profile_dirs": [...], "default_cpus": 1,
// "namespace_profiles": {"NAMESPACE": "PROFILE", ...}}.
struct WebhookConfig {
  WebhookPolicy policy = WebhookPolicy::kRaise;
  double memory_fraction_max = 0.5;
  std::vector<std::filesystem::path> profile_dirs;
  unsigned default_cpus = 1;  // CPUs of a container without a CPU limit or request
  // The profile of a pod without gpu-run.profile in that namespace (the host config's
  // default_profile, per namespace). Such a pod is sized only in its containers that request
  // GPUs (or gpu-run.containers); a plan that cannot be met admits it unchanged with a warning.
  std::map<std::string, std::string> namespace_profiles;
};

// Parses the config text; an unknown key or a bad value is an Error (exit 2) naming it.
WebhookConfig parse_webhook_config(const std::string& text, const std::string& source);

// The annotation that names the containers to give /dev/shm (comma-separated), instead of
// those that request GPUs.
inline constexpr const char* kContainersAnnotation = "gpu-run.containers";
// The volume the webhook adds (a suffix -2, -3, ... when the pod has one of that name).
inline constexpr const char* kShmVolumeName = "gpu-run-shm";

struct ReviewResult {
  nlohmann::json review;  // the AdmissionReview to send back
  std::string outcome;    // patched | allowed | warned | denied | error
  std::string fields;     // key=value for the log line: uid, namespace, pod, outcome, size, reason
};

// Reviews one AdmissionReview request body. Never throws: malformed input is an allowed
// response without a patch (outcome "error") or a denial with a reason.
ReviewResult review_admission(const std::string& body, const WebhookConfig& config, const ProfileStore& store);

// RFC 4648 base64 of `data` (AdmissionResponse.patch).
std::string base64_encode(const std::string& data);

}  // namespace gpurun
