#include "pod/pod_request.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.hpp"
#include "base/units.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace pod_request_test {

using nlohmann::json;

// 1 MiB a sample, batch 4, 2 workers a GPU, prefetch 2, pinned: with GPUs (a pin thread) a rank
// holds (2 x 2) x (4 MiB + 4 KiB) + semaphores (8 + 3 x 2 = 14 pages: 56 KiB) = 16 MiB + 72 KiB;
// 2 ranks and nccl_reserve 64 MiB: 32 MiB + 144 KiB + 64 MiB -> 97 MiB. max_shm 200 MiB.
constexpr const char* kProfile = R"({
  "name": "podtest", "extends": null,
  "fields": [{"name": "x", "shape": [1048576], "dtype": "uint8"}],
  "batch_size": 4, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true,
  "headroom": 1.0, "nccl_reserve": "64m", "min_shm": "1m", "max_shm": "200m"})";

class PodRequestTest : public ::testing::Test {
 protected:
  PodRequestTest() { dir_.write("podtest.json", kProfile); }

  // Decides `pod`; the request (kept for its targets) and why it is left alone, if it is.
  std::optional<PodLeftAlone> decide(const json& pod, const std::string* ns_profile = nullptr) {
    pod_ = pod;
    request_ = std::make_unique<PodRequest>(pod_, config_, store_, ns_profile);
    return request_->decide();
  }

  // Decides `pod`, whose request cannot be met: the Error's line.
  std::string cannot_meet(const json& pod) {
    try {
      const auto alone = decide(pod);
      ADD_FAILURE() << "met or left alone: " << (alone ? alone->reason : "patched");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  static json pod(const json& annotations, const std::vector<json>& containers) {
    return {{"metadata", {{"name", "p"}, {"annotations", annotations}}}, {"spec", {{"containers", json(containers)}}}};
  }
  static json container(const std::string& name, const json& limits = json::object()) {
    return {{"name", name}, {"resources", {{"limits", limits}}}};
  }

  test::TempDir dir_;
  WebhookConfig config_;
  ProfileStore store_{{dir_.path()}};
  json pod_;
  std::unique_ptr<PodRequest> request_;
};

TEST_F(PodRequestTest, TheContainersThatRequestGpusGetTheirPlan) {
  const auto refused = decide(
      pod({{"gpu-run.profile", "podtest"}}, {container("sidecar"), container("train", {{"nvidia.com/gpu", "2"}})}));
  ASSERT_FALSE(refused) << refused->reason;
  ASSERT_EQ(request_->targets().size(), 1u);
  const PodShmTarget& t = request_->targets()[0];
  EXPECT_EQ(t.list, "containers");
  EXPECT_EQ(t.index, 1u);
  EXPECT_EQ(t.decision.size, 97 * kMiB);
  EXPECT_EQ(t.decision.gpus, 2u);
  EXPECT_EQ(request_->total(), 97 * kMiB);
  EXPECT_EQ(request_->target_names(), "train");
  EXPECT_FALSE(request_->by_namespace_default());
  EXPECT_EQ(request_->default_profile_used(), "");
}

TEST_F(PodRequestTest, NoGpuContainerMeansEveryContainer) {
  ASSERT_FALSE(decide(pod({{"gpu-run.shm-size", "64Mi"}}, {container("a"), container("b")})));
  EXPECT_EQ(request_->target_names(), "a,b");
  EXPECT_EQ(request_->total(), 128 * kMiB) << "each container's size, summed: one volume";
}

TEST_F(PodRequestTest, TheContainersAnnotationNamesInitContainersToo) {
  json p = pod({{"gpu-run.shm-size", "64Mi"}, {"gpu-run.containers", " loader, train"}}, {container("train")});
  p["spec"]["initContainers"] = json::array({container("loader")});
  ASSERT_FALSE(decide(p));
  ASSERT_EQ(request_->targets().size(), 2u);
  EXPECT_EQ(request_->targets()[1].list, "initContainers");
  p["metadata"]["annotations"]["gpu-run.containers"] = "train,nope";
  EXPECT_EQ(cannot_meet(p), "gpu-run.containers: the pod has no container 'nope'");
  p["metadata"]["annotations"]["gpu-run.containers"] = " , ";
  EXPECT_EQ(cannot_meet(p), "gpu-run.containers: names no container");
}

TEST_F(PodRequestTest, WhatItLeavesAloneAndWhetherItWarns) {
  auto refused = decide(pod(json::object(), {container("a")}));
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->warn);
  EXPECT_EQ(refused->reason, "no gpu-run request annotation");

  json host_ipc = pod({{"gpu-run.profile", "podtest"}}, {container("a")});
  host_ipc["spec"]["hostIPC"] = true;
  refused = decide(host_ipc);
  ASSERT_TRUE(refused);
  EXPECT_TRUE(refused->warn);
  EXPECT_CONTAINS(refused->reason, "hostIPC");

  // A namespace's default sizes only the containers that request GPUs.
  const std::string ns = "podtest";
  refused = decide(pod(json::object(), {container("a")}), &ns);
  ASSERT_TRUE(refused);
  EXPECT_TRUE(request_->by_namespace_default());
  ASSERT_FALSE(decide(pod(json::object(), {container("t", {{"nvidia.com/gpu", "2"}})}), &ns));
  EXPECT_EQ(request_->default_profile_used(), "podtest");
}

TEST_F(PodRequestTest, ADevShmMountOfItsOwnOrOfOursIsLeftAlone) {
  json p = pod({{"gpu-run.profile", "podtest"}}, {container("a")});
  p["spec"]["volumes"] = json::array({{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}});
  p["spec"]["containers"][0]["volumeMounts"] = json::array({{{"name", "dshm"}, {"mountPath", "/dev/shm"}}});
  auto refused = decide(p);
  ASSERT_TRUE(refused);
  EXPECT_TRUE(refused->warn) << "the pod's own dshm: gpu-run did not size it";
  EXPECT_CONTAINS(refused->reason, "already mounts volume 'dshm' at /dev/shm");
  // What an older gpu-run-ctl k8s wrote: dshm with GPU_RUN_SHM_LIMIT beside it.
  p["spec"]["containers"][0]["env"] = json::array({{{"name", "GPU_RUN_SHM_LIMIT"}, {"value", "1g"}}});
  refused = decide(p);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->warn);
  EXPECT_EQ(refused->reason, "already has gpu-run's /dev/shm (volume dshm)");
}

TEST_F(PodRequestTest, CoresRefusalInThePodsWords) {
  // 8 GPUs: 8 x (16 MiB + 72 KiB) + 64 MiB = 192.6 MiB; 200 MiB max_shm holds it, a 256Mi limit's
  // budget (128 MiB) does not.
  config_.policy = WebhookPolicy::kDeny;
  std::string refused = cannot_meet(
      pod({{"gpu-run.profile", "podtest"}}, {container("t", {{"nvidia.com/gpu", "8"}, {"memory", "256Mi"}})}));
  EXPECT_CONTAINS(refused, "container 't': planned /dev/shm of 193MiB does not fit the memory limit 256MiB");
  EXPECT_CONTAINS(refused,
                  "raise resources.limits.memory to at least 386Mi, or lower gpu-run.workers (now 2) or "
                  "gpu-run.batch-size (now 4)");
  EXPECT_NOT_CONTAINS(refused, "--");
  // 12 GPUs: 12 x 16.07 MiB + 64 MiB = 256.8 MiB, above max_shm.
  refused = cannot_meet(pod({{"gpu-run.profile", "podtest"}}, {container("t", {{"nvidia.com/gpu", "12"}})}));
  EXPECT_CONTAINS(refused, "is above the profile's max_shm 200MiB: lower gpu-run.workers or gpu-run.batch-size");
  // A bad quantity is the pod's input: cannot be met, named.
  refused = cannot_meet(pod({{"gpu-run.profile", "podtest"}}, {container("t", {{"nvidia.com/gpu", "lots"}})}));
  EXPECT_CONTAINS(refused, "nvidia.com/gpu");
}

}  // namespace pod_request_test
}  // namespace gpurun
