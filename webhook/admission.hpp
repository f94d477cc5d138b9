#pragma once

// gpu-run-webhook's decision: an AdmissionReview for a Pod in, the AdmissionReview response
// out, with a JSONPatch that gives the pod a memory-backed /dev/shm of the planned size: the
// envelope around pod/'s review_pod. Pure over its inputs (the profile store reads profile files
// by name, nothing else).
// docs/ARCHITECTURE.md, "The doors" (the webhook row).

#include <nlohmann/json.hpp>
#include <string>

#include "pod/pod_review.hpp"
#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

struct ReviewResult {
  nlohmann::json review;  // the AdmissionReview to send back
  ReviewOutcome outcome = ReviewOutcome::kAllowed;
  std::string fields;  // key=value for the log line: uid, namespace, pod, outcome, size, reason
};

// Reviews one AdmissionReview request body. Never throws: malformed input is an allowed
// response without a patch (outcome kError) or a denial with a reason.
ReviewResult review_admission(const std::string& body, const WebhookConfig& config, const ProfileStore& store);

}  // namespace gpurun
