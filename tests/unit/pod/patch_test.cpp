#include "pod/patch.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "base/error.hpp"
#include "base/units.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace patch_test {

using nlohmann::json;

// pod_request_test's profile: 2 GPUs -> 97 MiB; max_shm 1 GiB here.
constexpr const char* kProfile = R"({
  "name": "patchtest", "extends": null,
  "fields": [{"name": "x", "shape": [1048576], "dtype": "uint8"}],
  "batch_size": 4, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true,
  "headroom": 1.0, "nccl_reserve": "64m", "min_shm": "1m", "max_shm": "1g"})";

class ShmPatchTest : public ::testing::Test {
 protected:
  ShmPatchTest() { dir_.write("patchtest.json", kProfile); }

  // The patch for `pod`, through the request's targets as the review makes them.
  json patch_of(const json& pod) {
    pod_ = pod;
    PodRequest request(pod_, config_, store_, nullptr);
    const auto refused = request.decide();
    if (refused) ADD_FAILURE() << refused->reason;
    const DecisionRecord record =
        pod_decision(request.targets(), request.total(), pod_size_limit(request.targets(), config_), "gpu-run-webhook");
    record_ = decision_text(record);
    return shm_patch(request.spec(), request.targets(), request.total(), config_, record);
  }

  static json pod(const std::vector<json>& containers, const json& volumes = nullptr) {
    json p = {{"metadata", {{"annotations", {{"gpu-run.profile", "patchtest"}}}}},
              {"spec", {{"containers", json(containers)}}}};
    if (!volumes.is_null()) p["spec"]["volumes"] = volumes;
    return p;
  }
  static json train(const json& resources, const json& env = nullptr) {
    json c = {{"name", "train"}, {"resources", resources}};
    if (!env.is_null()) c["env"] = env;
    return c;
  }

  test::TempDir dir_;
  WebhookConfig config_;
  ProfileStore store_{{dir_.path()}};
  json pod_;
  std::string record_;  // the last patch's decision record, as its env carries it
};

TEST_F(ShmPatchTest, RaiseAddsTheVolumeItsMountTheEnvAndTheMemory) {
  // A stale GPU_RUN_SHM_LIMIT is replaced in place (GPU_RUN_SHM_SIZE would be a request: the size).
  const json env = json::array({{{"name", "GPU_RUN_SHM_LIMIT"}, {"value", "5g"}}, {{"name", "X"}, {"value", "1"}}});
  const json ops = patch_of(pod(
      {train({{"limits", {{"nvidia.com/gpu", "2"}, {"memory", "32Gi"}}}, {"requests", {{"memory", "16Gi"}}}}, env)}));
  // sizeLimit: the guard's ceiling, max_shm 1 GiB (the raised limit's budget, 16 GiB and more, is
  // above it). The limit and request each raised by the 97 MiB: 32768 + 97, 16384 + 97 Mi.
  json expected = json::parse(R"([
    {"op": "add", "path": "/spec/volumes",
     "value": [{"name": "gpu-run-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]},
    {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": [{"name": "gpu-run-shm", "mountPath": "/dev/shm"}]},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_PROFILE", "value": "patchtest"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_GPUS", "value": "2"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_WORKERS", "value": "2"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_NUM_WORKERS", "value": "2"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_BATCH_SIZE", "value": "4"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_SHM_SIZE", "value": "97m"}},
    {"op": "replace", "path": "/spec/containers/0/env/0", "value": {"name": "GPU_RUN_SHM_LIMIT", "value": "1024m"}},
    {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "GPU_RUN_DECISION", "value": null}},
    {"op": "replace", "path": "/spec/containers/0/resources/limits/memory", "value": "32865Mi"},
    {"op": "replace", "path": "/spec/containers/0/resources/requests/memory", "value": "16481Mi"}
  ])");
  expected[9]["value"]["value"] = record_;  // the pod's decision record, where the guard finds it
  EXPECT_EQ(ops, expected) << ops.dump(1);
}

TEST_F(ShmPatchTest, DenyLeavesTheMemoryAndANewEnvIsOneArray) {
  config_.policy = WebhookPolicy::kDeny;
  const json ops = patch_of(pod({train({{"limits", {{"nvidia.com/gpu", "2"}, {"memory", "32Gi"}}}})}));
  ASSERT_EQ(ops.size(), 3u) << ops.dump(1);
  EXPECT_EQ(ops[2]["op"], "add");
  EXPECT_EQ(ops[2]["path"], "/spec/containers/0/env");
  EXPECT_EQ(ops[2]["value"].size(), 8u);
  for (const json& op : ops) EXPECT_EQ(op["path"].get<std::string>().find("resources"), std::string::npos);
}

TEST_F(ShmPatchTest, ANameThePodHasGetsASuffix) {
  const json volumes =
      json::array({{{"name", "gpu-run-shm"}, {"configMap", {{"name", "x"}}}}, {{"name", "gpu-run-shm-2"}}});
  const json ops = patch_of(pod({train({{"limits", {{"nvidia.com/gpu", "2"}}}})}, volumes));
  EXPECT_EQ(ops[0]["path"], "/spec/volumes/-");
  EXPECT_EQ(ops[0]["value"]["name"], "gpu-run-shm-3");
  EXPECT_EQ(ops[1]["value"][0]["name"], "gpu-run-shm-3");
  // Without a memory limit the kubelet mounts the emptyDir at its sizeLimit: the plan, 97 MiB.
  EXPECT_EQ(ops[0]["value"]["emptyDir"]["sizeLimit"], "97Mi");
}

TEST_F(ShmPatchTest, TwoContainersShareOneVolume) {
  json second = train({{"limits", {{"nvidia.com/gpu", "2"}}}});
  second["name"] = "eval";
  const json ops = patch_of(pod({train({{"limits", {{"nvidia.com/gpu", "2"}}}}), second}));
  // One volume of the two shares (without a memory limit, each its plan: 97 MiB); each container
  // sees the whole volume's plan.
  EXPECT_EQ(ops[0]["value"][0]["emptyDir"]["sizeLimit"], "194Mi");
  for (const json& op : ops)
    if (op["path"].get<std::string>().find("/env") != std::string::npos)
      for (const json& e : op["value"])
        if (e["name"] == "GPU_RUN_SHM_SIZE") {
          EXPECT_EQ(e["value"], "194m");
        }
}

TEST_F(ShmPatchTest, ABadMemoryQuantityUnderRaiseNamesTheContainer) {
  EXPECT_CONTAINS(expect_error([&] {
                    patch_of(pod({train({{"limits", {{"nvidia.com/gpu", "2"}, {"memory", "16g"}}}})}));
                  }).what(),
                  "container 'train' limits.memory '16g'");
}

TEST(ShmVolume, OursByNameAndMediumOrByTheOlderK8sMark) {
  const json spec = {{"volumes", json::array({{{"name", "gpu-run-shm"}, {"emptyDir", {{"medium", "Memory"}}}},
                                              {{"name", "gpu-run-shm-2"}, {"emptyDir", json::object()}},
                                              {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}})}};
  const json plain = {{"name", "c"}};
  const json marked = {{"name", "c"}, {"env", json::array({{{"name", "GPU_RUN_SHM_LIMIT"}, {"value", "1g"}}})}};
  EXPECT_TRUE(is_shm_volume_of_ours(spec, plain, "gpu-run-shm"));
  EXPECT_FALSE(is_shm_volume_of_ours(spec, plain, "gpu-run-shm-2")) << "not in memory";
  EXPECT_FALSE(is_shm_volume_of_ours(spec, plain, "gpu-run-shm-9")) << "not in the pod";
  EXPECT_FALSE(is_shm_volume_of_ours(spec, plain, "dshm")) << "a dshm of the pod's own";
  EXPECT_TRUE(is_shm_volume_of_ours(spec, marked, "dshm"));
}

}  // namespace patch_test
}  // namespace gpurun
