#include "pod_review.hpp"

#include "patch.hpp"
#include "pod_request.hpp"

namespace gpurun {

PodReview review_pod(const nlohmann::json& pod, const WebhookConfig& config, const ProfileStore& store,
                     const std::string* default_profile, const std::string& door) {
  PodRequest request(pod, config, store, default_profile);
  PodReview r;
  try {
    request.decide();
    // What it decided, once, on the pod (decision_record.hpp), and in its containers' environment.
    const DecisionRecord record =
        pod_decision(request.targets(), request.total(), pod_size_limit(request.targets(), config), door);
    r.patch = shm_patch(request.spec(), request.targets(), request.total(), config, record);
    r.patch.push_back(decision_annotation_op(pod, record));
    r.outcome = "patched";
    r.size = request.total();
    r.containers = request.target_names();
    r.default_profile_used = request.default_profile_used();
  } catch (const LeaveAlone& leave) {
    r.outcome = leave.warn ? "warned" : "allowed";
    r.reason = leave.reason;
    if (leave.warn) r.warning = leave.reason;
  } catch (const CannotMeet& cannot) {
    r.reason = cannot.reason;
    // A pod that asked nothing is never denied for a default profile (as a host's
    // default_profile is skipped with a warning, never failed, by default).
    if (config.policy == WebhookPolicy::kWarn || request.by_namespace_default()) {
      r.outcome = "warned";
      r.warning = cannot.reason + "; the pod was admitted without a /dev/shm change";
    } else {
      r.outcome = "denied";
    }
  }
  return r;
}

}  // namespace gpurun
