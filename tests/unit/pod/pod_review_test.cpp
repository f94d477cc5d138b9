#include "pod/pod_review.hpp"

#include <gtest/gtest.h>

#include "base/k8s_quantity.hpp"
#include "base/units.hpp"
#include "decision/decision_record.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

// admission_test's webtest: 2 GPUs -> 2 * (16 MiB + 72 KiB) + 64 MiB NCCL -> 97 MiB.
constexpr const char* kReviewProfile = R"({
  "name": "webtest", "extends": null,
  "fields": [{"name": "x", "shape": [1048576], "dtype": "uint8"}],
  "batch_size": 4, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true,
  "headroom": 1.0, "nccl_reserve": "64m", "min_shm": "1m", "max_shm": "1g"})";

class PodReviewTest : public ::testing::Test {
 protected:
  PodReviewTest() { dir_.write("webtest.json", kReviewProfile); }

  PodReview review(const json& pod, const std::string* default_profile = nullptr) const {
    const ProfileStore store({dir_.path(), builtin_profile_dir(test::builtin_only_env)});
    return review_pod(pod, config_, store, default_profile);
  }

  static json pod_with(const json& annotations, const json& containers) {
    return {{"metadata", {{"name", "p"}, {"annotations", annotations}}}, {"spec", {{"containers", containers}}}};
  }

  static json gpu_container(const std::string& name, const json& limits) {
    return {{"name", name}, {"image", "pytorch/pytorch"}, {"resources", {{"limits", limits}}}};
  }

  test::TempDir dir_;
  WebhookConfig config_;
};

TEST_F(PodReviewTest, PatchedRaisesTheLimitItFinds) {
  const json pod = pod_with({{"gpu-run.profile", "webtest"}},
                            json::array({gpu_container("train", {{"nvidia.com/gpu", "2"}, {"memory", "32Gi"}}),
                                         {{"name", "sidecar"}, {"image", "busybox"}}}));
  const PodReview r = review(pod);
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.reason;
  EXPECT_EQ(r.size, 97 * kMiB);
  EXPECT_EQ(r.containers, "train");
  EXPECT_TRUE(r.reason.empty());
  const json patched = pod.patch(r.patch);
  const auto limit = parse_k8s_quantity(patched["spec"]["containers"][0]["resources"]["limits"]["memory"], "limit");
  EXPECT_EQ(limit, (32ull << 30) + 97 * kMiB) << "32Gi raised by the plan, never lowered";
  EXPECT_FALSE(patched["spec"]["containers"][1].contains("volumeMounts")) << "the sidecar is left alone";
  // What it decided, once, in the pod's annotation; the pod's own annotations kept.
  EXPECT_EQ(patched["metadata"]["annotations"]["gpu-run.profile"], "webtest");
  const DecisionRecord d =
      parse_decision(patched["metadata"]["annotations"]["gpu-run.decision"].get<std::string>(), "test");
  EXPECT_EQ(d.door, "gpu-run-webhook");
  EXPECT_EQ(d.size, 97 * kMiB);
  EXPECT_EQ(d.profile, "webtest");
  EXPECT_EQ(d.gpus, 2u);
  EXPECT_EQ(d.ceiling, parse_k8s_quantity(patched["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "sizeLimit"));
  // The same record in the sized container's environment, where the guard finds it on any node
  // (GPU_RUN_SHM_LIMIT kept for the guards that read only it).
  std::map<std::string, std::string> env;
  for (const json& e : patched["spec"]["containers"][0]["env"]) env[e["name"]] = e["value"];
  EXPECT_EQ(env.at("GPU_RUN_DECISION"), patched["metadata"]["annotations"]["gpu-run.decision"]);
  EXPECT_EQ(parse_size(env.at("GPU_RUN_SHM_LIMIT"), "limit"), d.ceiling);
  EXPECT_FALSE(patched["spec"]["containers"][1].contains("env")) << "the sidecar is left alone";
  // A record the pod carried (forged) is replaced; a pod without annotations gets them.
  json forged = pod;
  forged["metadata"]["annotations"]["gpu-run.decision"] = R"({"version":1,"ceiling":1})";
  const json replaced = forged.patch(review(forged).patch);
  EXPECT_EQ(parse_decision(replaced["metadata"]["annotations"]["gpu-run.decision"].get<std::string>(), "t").size,
            97 * kMiB);
  const std::string webtest = "webtest";
  json bare = {{"spec", {{"containers", json::array({gpu_container("t", {{"nvidia.com/gpu", "1"}})})}}}};
  const json with_meta = bare.patch(review(bare, &webtest).patch);
  EXPECT_TRUE(with_meta["metadata"]["annotations"].contains("gpu-run.decision"));
}

TEST_F(PodReviewTest, NumbersAsAManifestWritesThem) {
  // YAML's `nvidia.com/gpu: 2` and `cpu: 0.5` reach the review as JSON numbers.
  const PodReview r = review(pod_with({{"gpu-run.profile", "webtest"}},
                                      json::array({gpu_container("train", {{"nvidia.com/gpu", 2}, {"cpu", 0.5}})})));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.reason;
  EXPECT_EQ(r.size, 97 * kMiB);
}

TEST_F(PodReviewTest, ADefaultProfileSizesOnlyGpuContainersAndNeverDenies) {
  const std::string webtest = "webtest";
  const json plain = pod_with(json::object(), json::array({gpu_container("train", {{"nvidia.com/gpu", "2"}})}));
  EXPECT_EQ(review(plain).outcome, ReviewOutcome::kAllowed) << "no request, no default: left alone";
  const PodReview sized = review(plain, &webtest);
  EXPECT_EQ(sized.outcome, ReviewOutcome::kPatched);
  EXPECT_EQ(sized.default_profile_used, "webtest");
  const PodReview cpu_only =
      review(pod_with(json::object(), json::array({gpu_container("web", {{"cpu", "2"}})})), &webtest);
  EXPECT_EQ(cpu_only.outcome, ReviewOutcome::kAllowed);
  EXPECT_CONTAINS(cpu_only.reason, "nvidia.com/gpu");
  const std::string missing = "no-such-profile";
  const PodReview warned = review(plain, &missing);
  EXPECT_EQ(warned.outcome, ReviewOutcome::kWarned);
  EXPECT_CONTAINS(warned.warning, "admitted without a /dev/shm change");
  EXPECT_CONTAINS(warned.reason, "no-such-profile");
}

TEST_F(PodReviewTest, DeniesARequestItCannotPlanAndWarnsForHostIpc) {
  const json asked = pod_with({{"gpu-run.profile", "no-such-profile"}},
                              json::array({gpu_container("train", {{"nvidia.com/gpu", "1"}})}));
  const PodReview denied = review(asked);
  EXPECT_EQ(denied.outcome, ReviewOutcome::kDenied);
  EXPECT_CONTAINS(denied.reason, "no-such-profile");
  EXPECT_TRUE(denied.patch.is_null());
  json host_ipc = pod_with({{"gpu-run.profile", "webtest"}}, json::array({gpu_container("t", json::object())}));
  host_ipc["spec"]["hostIPC"] = true;
  const PodReview warned = review(host_ipc);
  EXPECT_EQ(warned.outcome, ReviewOutcome::kWarned);
  EXPECT_CONTAINS(warned.warning, "hostIPC");
}

}  // namespace
}  // namespace gpurun
