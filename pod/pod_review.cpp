#include "pod/pod_review.hpp"

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "pod/patch.hpp"
#include "pod/pod_json.hpp"
#include "pod/pod_request.hpp"

namespace gpurun {

const char* review_outcome_name(ReviewOutcome outcome) {
  switch (outcome) {
    case ReviewOutcome::kPatched:
      return "patched";
    case ReviewOutcome::kAllowed:
      return "allowed";
    case ReviewOutcome::kWarned:
      return "warned";
    case ReviewOutcome::kDenied:
      return "denied";
    case ReviewOutcome::kError:
      return "error";
  }
  return "error";
}

PodReview review_pod(const nlohmann::json& pod, const WebhookConfig& config, const ProfileStore& store,
                     const std::string* default_profile, const std::string& door) {
  PodRequest request(pod, config, store, default_profile);
  PodReview r;
  try {
    if (const std::optional<PodLeftAlone> alone = request.decide()) {
      r.reason = alone->reason;
      r.outcome = alone->warn ? ReviewOutcome::kWarned : ReviewOutcome::kAllowed;
      if (alone->warn) r.warning = alone->reason;
      return r;
    }
    // What it decided, once, on the pod (decision_record.hpp), and in its containers' environment.
    const DecisionRecord record =
        pod_decision(request.targets(), request.total(), pod_size_limit(request.targets(), config), door);
    r.patch = shm_patch(request.spec(), request.targets(), request.total(), config, record);
    r.patch.push_back(decision_annotation_op(pod, record));
    r.outcome = ReviewOutcome::kPatched;
    r.size = request.total();
    r.containers = request.target_names();
    r.default_profile_used = request.default_profile_used();
    for (const PodShmTarget& t : request.targets())
      if (!t.decision.command_warning.empty())
        r.warnings.push_back("container '" + k8s_shown(container_name(*t.container)) +
                             "': " + t.decision.command_warning);
    return r;
  } catch (const Error& e) {
    // The request cannot be met. A pod that asked nothing is never denied for a default profile
    // (as a host's default_profile is skipped with a warning, never failed, by default).
    r = PodReview{};
    r.reason = e.what();
    if (config.policy == WebhookPolicy::kWarn || request.by_namespace_default()) {
      r.outcome = ReviewOutcome::kWarned;
      r.warning = r.reason + "; the pod was admitted without a /dev/shm change";
    } else {
      r.outcome = ReviewOutcome::kDenied;
    }
    return r;
  }
}

}  // namespace gpurun
