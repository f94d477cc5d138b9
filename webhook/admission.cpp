#include "webhook/admission.hpp"

#include <cstddef>

#include "base/base64.hpp"
#include "base/k8s_quantity.hpp"
#include "base/log.hpp"
#include "pod/pod_json.hpp"
#include "pod/pod_review.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxUidBytes = 256;

std::string pod_label(const json& pod) {
  const json* meta = member(pod, "metadata");
  if (!meta) return "";
  std::string name = string_at(*meta, "name");
  if (name.empty()) name = string_at(*meta, "generateName");
  return k8s_shown(name);
}

}  // namespace

ReviewResult review_admission(const std::string& body, const WebhookConfig& config, const ProfileStore& store) {
  std::string uid;
  std::string api_version = "admission.k8s.io/v1";
  std::string where;  // namespace/pod for the log
  json response = {{"allowed", true}};
  ReviewResult r;
  auto finish = [&](ReviewOutcome outcome, const std::string& reason) {
    response["uid"] = uid;
    r.review = {{"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"response", response}};
    r.outcome = outcome;
    r.fields = "uid=" + log_quote(uid) + (where.empty() ? "" : " pod=" + log_quote(where)) +
               " outcome=" + review_outcome_name(outcome) + r.fields +
               (reason.empty() ? "" : " reason=" + log_quote(reason));
    return r;
  };
  auto warn = [&](const std::string& message) { response["warnings"] = json::array({"gpu-run: " + message}); };
  try {
    const json in = json::parse(body, nullptr, false);
    if (in.is_discarded()) {
      warn("malformed AdmissionReview: not JSON");
      return finish(ReviewOutcome::kError, "malformed JSON");
    }
    const json* request = member(in, "request");
    if (!request || !request->is_object()) {
      warn("malformed AdmissionReview: no request");
      return finish(ReviewOutcome::kError, "no request");
    }
    if (string_at(in, "apiVersion") == "admission.k8s.io/v1beta1") api_version = "admission.k8s.io/v1beta1";
    uid = string_at(*request, "uid");
    if (uid.size() > kMaxUidBytes) {
      uid.clear();
      warn("malformed AdmissionReview: request.uid is too long");
      return finish(ReviewOutcome::kError, "uid too long");
    }
    where = string_at(*request, "namespace");
    const json* kind = member(*request, "kind");
    if (!kind || string_at(*kind, "kind") != "Pod" || !string_at(*kind, "group").empty())
      return finish(ReviewOutcome::kAllowed, "not a Pod");
    if (const json* op = member(*request, "operation"); op && op->is_string() && *op != "CREATE")
      return finish(ReviewOutcome::kAllowed,
                    "operation " + k8s_shown(op->get<std::string>()) + ": only CREATE is changed");
    if (!string_at(*request, "subResource").empty()) return finish(ReviewOutcome::kAllowed, "a subresource");
    const json* pod = member(*request, "object");
    if (!pod || !pod->is_object()) {
      warn("malformed AdmissionReview: request.object is not a Pod");
      return finish(ReviewOutcome::kError, "no object");
    }
    const auto ns_default = config.namespace_profiles.find(where);
    where += "/" + pod_label(*pod);
    const PodReview pod_review =
        review_pod(*pod, config, store, ns_default == config.namespace_profiles.end() ? nullptr : &ns_default->second);
    if (!pod_review.warning.empty()) warn(pod_review.warning);
    for (const std::string& line : pod_review.warnings) response["warnings"].push_back("gpu-run: " + line);
    if (pod_review.outcome == ReviewOutcome::kPatched) {
      response["patchType"] = "JSONPatch";
      response["patch"] = base64_encode(pod_review.patch.dump());
      r.fields = " size=" + k8s_quantity(pod_review.size) + " containers=" + log_quote(pod_review.containers);
      if (!pod_review.default_profile_used.empty())
        r.fields += " namespace_profile=" + log_quote(pod_review.default_profile_used);
    } else if (pod_review.outcome == ReviewOutcome::kDenied) {
      response["allowed"] = false;
      response["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", "gpu-run: " + pod_review.reason}};
    }
    return finish(pod_review.outcome, pod_review.reason);
  } catch (const std::exception& e) {
    response = {{"allowed", true}};
    warn(std::string("could not review the pod: ") + e.what());
    r.fields.clear();
    return finish(ReviewOutcome::kError, e.what());
  }
}

}  // namespace gpurun
