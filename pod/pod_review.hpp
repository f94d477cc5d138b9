#pragma once

// One Pod's review: what gpu-run-webhook answers for a pod at admission, and what gpu-run-ctl
// k8s -f does to each pod template of a manifest. Pure over its inputs (the profile store reads
// profile files by name, nothing else). docs/ARCHITECTURE.md, "The doors" (the webhook row).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

// What became of a pod at admission; "error" only from the webhook's envelope (a malformed review).
enum class ReviewOutcome { kPatched, kAllowed, kWarned, kDenied, kError };

// "patched", "allowed", "warned", "denied", "error": the log's outcome= and the metrics' names.
const char* review_outcome_name(ReviewOutcome outcome);

struct PodReview {
  ReviewOutcome outcome = ReviewOutcome::kAllowed;
  nlohmann::json patch;              // patched: the JSONPatch (RFC 6902) ops, paths from the pod's root
  std::string reason;                // why it was not patched, in one line ("" when patched)
  std::string warning;               // warned: the warning for the person who created the pod
  std::uint64_t size = 0;            // patched: the plan, the sum over the containers that got /dev/shm
  std::string containers;            // patched: their names, comma-separated
  std::string default_profile_used;  // patched with `default_profile` (the pod named none), else ""
  // patched: a container's command line starting other workers than its plan, one line each
  // ("container 'train': the command line's '-j 8' asks for 8 DataLoader workers, ...").
  std::vector<std::string> warnings;
};

// Reviews the Pod `pod` (a Pod's JSON as the API server sends it: metadata, spec). Its gpu-run.*
// annotations ask; `default_profile` (or null) is the profile of a pod that names none: only its
// containers that request GPUs are then sized, and a plan that cannot be met warns instead of
// denying. Denied: a request that cannot be planned (under "deny" also one over the memory
// budget). Never throws gpurun::Error for the pod's content. A patch also records the decision
// in the pod's annotation gpu-run.decision, written by `door`.
PodReview review_pod(const nlohmann::json& pod, const WebhookConfig& config, const ProfileStore& store,
                     const std::string* default_profile, const std::string& door = "gpu-run-webhook");

}  // namespace gpurun
