// gpu-run-webhook's review: an AdmissionReview body, as the API server (or anyone who reaches
// the port) sends it. Whatever the bytes, the answer is an AdmissionReview with a boolean
// `allowed` and a string uid; a patch is base64 of a JSON array.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_input.hpp"
#include "profiles/profile_store.hpp"
#include "webhook/admission.hpp"

using namespace gpurun;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ProfileStore store({GPU_RUN_FUZZ_PROFILES});
  static const WebhookConfig configs[3] = {{WebhookPolicy::kRaise, 0.5, {}, 1, {}},
                                           {WebhookPolicy::kDeny, 0.5, {}, 4, {}},
                                           {WebhookPolicy::kWarn, 0.25, {}, 2, {}}};
  const std::string body = fuzz::as_string(data, size);
  const ReviewResult r = review_admission(body, configs[size % 3], store);
  const nlohmann::json& response = r.review.at("response");
  GPU_RUN_FUZZ_CHECK(response.at("allowed").is_boolean());
  GPU_RUN_FUZZ_CHECK(response.at("uid").is_string());
  if (response.contains("patch")) {
    GPU_RUN_FUZZ_CHECK(response.at("allowed").get<bool>());
    GPU_RUN_FUZZ_CHECK(r.outcome == ReviewOutcome::kPatched);
    const std::string& p = response.at("patch").get_ref<const std::string&>();
    GPU_RUN_FUZZ_CHECK(p.size() % 4 == 0);
  }
  if (!response.at("allowed").get<bool>()) GPU_RUN_FUZZ_CHECK(response.at("status").at("message").is_string());
  (void)r.review.dump();
  return 0;
}
