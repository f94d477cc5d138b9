#include "k8s.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "config.hpp"
#include "error.hpp"
#include "plan.hpp"
#include "test_fixtures.hpp"
#include "test_util.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using test::builtin_only_env;
using test::host_with_cpus;

TEST(K8sQuantity, FormatsInTheLargestExactBinaryUnit) {
  EXPECT_EQ(k8s_quantity(1556 * kMiB), "1556Mi");
  EXPECT_EQ(k8s_quantity(2 * kGiB), "2Gi");
  EXPECT_EQ(k8s_quantity(kGiB + kGiB / 2), "1536Mi");
  EXPECT_EQ(k8s_quantity(1024ull * kGiB), "1Ti");
  EXPECT_EQ(k8s_quantity(4096), "4Ki");
  EXPECT_EQ(k8s_quantity(4097), "4097");
  EXPECT_EQ(k8s_quantity(0), "0");
}

TEST(K8sQuantity, ParsesKubernetesMemoryQuantities) {
  EXPECT_EQ(parse_k8s_quantity("16Gi", "--memory"), 16 * kGiB);
  EXPECT_EQ(parse_k8s_quantity("512Mi", "--memory"), 512 * kMiB);
  EXPECT_EQ(parse_k8s_quantity("1.5Gi", "--memory"), kGiB + kGiB / 2);
  EXPECT_EQ(parse_k8s_quantity("16G", "--memory"), 16000000000ull);
  EXPECT_EQ(parse_k8s_quantity("1.5k", "--memory"), 1500u);
  EXPECT_EQ(parse_k8s_quantity("123", "--memory"), 123u);
  EXPECT_EQ(parse_k8s_quantity("0.5Ki", "--memory"), 512u);
}

TEST(K8sQuantity, RejectsOtherSyntaxNamingTheFlag) {
  for (const char* bad :
       {"", "16g", "16m", "16GB", "1e3", "-1Gi", "Gi", "0", "0.0Mi", " 1Gi", "99999999999999999999"}) {
    Error e = expect_error([&] { parse_k8s_quantity(bad, "--memory"); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
    EXPECT_CONTAINS(e.what(), "--memory");
  }
  EXPECT_CONTAINS(expect_error([] { parse_k8s_quantity("16g", "--memory"); }).what(), "16Gi");
}

ShmPlan sample_plan(unsigned gpus) {
  ShmPlan p;
  p.profile = "imagenet";
  p.gpus = gpus;
  p.ranks = std::max(gpus, 1u);
  p.workers = 4;
  p.batch_size = 64;
  p.shm = 1556 * kMiB;
  return p;
}

TEST(K8sPatch, HasExactKubernetesFieldsAndRaisesMemoryByTheShmSize) {
  K8sOptions o;
  o.container = "main";
  o.memory = "16Gi";
  o.runtime_class = "nvidia";
  const json patch = json::parse(k8s_patch(o, sample_plan(2)).dump());
  // The sizeLimit is the guard's ceiling, the memory budget: half of 16Gi + 1556Mi = 8970Mi.
  const json expected = json::parse(R"({
    "spec": {
      "runtimeClassName": "nvidia",
      "containers": [{
        "name": "main",
        "env": [{"name": "GPU_RUN_PROFILE", "value": "imagenet"},
                {"name": "GPU_RUN_GPUS", "value": "2"},
                {"name": "GPU_RUN_NUM_WORKERS", "value": "4"},
                {"name": "GPU_RUN_BATCH_SIZE", "value": "64"},
                {"name": "GPU_RUN_SHM_SIZE", "value": "1556m"},
                {"name": "GPU_RUN_SHM_LIMIT", "value": "8970m"}],
        "resources": {"requests": {"memory": "17940Mi"},
                      "limits": {"memory": "17940Mi", "nvidia.com/gpu": "2"}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]
      }],
      "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8970Mi"}}]
    }
  })");
  EXPECT_EQ(patch, expected);
}

TEST(K8sPatch, WithoutMemoryUsesTheStatedBasePerRankAndNoGpuLimitForZero) {
  K8sOptions o;
  o.container = "trainer";
  const json patch = json::parse(k8s_patch(o, sample_plan(0)).dump());
  const json& c = patch["spec"]["containers"][0];
  EXPECT_EQ(c["name"], "trainer");
  EXPECT_EQ(c["resources"]["limits"]["memory"], k8s_quantity(kK8sBaseMemoryPerRank + 1556 * kMiB));
  EXPECT_FALSE(c["resources"]["limits"].contains("nvidia.com/gpu"));
  EXPECT_FALSE(patch["spec"].contains("runtimeClassName"));
  const json two = json::parse(k8s_patch(o, sample_plan(2)).dump());
  EXPECT_EQ(two["spec"]["containers"][0]["resources"]["requests"]["memory"],
            k8s_quantity(2 * kK8sBaseMemoryPerRank + 1556 * kMiB));
}

TEST(K8sPatch, RequiresTheContainerNameSoThatItNeverAddsAContainer) {
  K8sOptions o;
  const std::string what = expect_error([&] { k8s_patch(o, sample_plan(1)); }).what();
  EXPECT_CONTAINS(what, "--container is required");
  EXPECT_CONTAINS(what, "would add a new one");
}

TEST(K8sPatch, RejectsNamesKubernetesWouldRefuse) {
  K8sOptions o;
  o.container = "Main_1";
  EXPECT_CONTAINS(expect_error([&] { k8s_patch(o, sample_plan(1)); }).what(), "--container");
  o.container = "main";
  o.runtime_class = "Nvidia";
  EXPECT_CONTAINS(expect_error([&] { k8s_patch(o, sample_plan(1)); }).what(), "--runtime-class");
}

TEST(K8sRuntimeClass, NamesTheHandlerAndRefusesANameContainerdCannotHave) {
  const std::string yaml = runtime_class_manifest("gpu-run");
  EXPECT_CONTAINS(yaml,
                  "apiVersion: \"node.k8s.io/v1\"\nkind: \"RuntimeClass\"\nmetadata:\n  name: \"gpu-run\"\n"
                  "handler: \"gpu-run\"\n");
  EXPECT_EQ(yaml.rfind('#', 0), 0u);  // a comment line first, then the manifest
  EXPECT_CONTAINS(runtime_class_manifest("gpu-run-b"), "handler: \"gpu-run-b\"");
  for (const char* bad : {"", "GPU", "a.b", "gpu_run", "-x"}) {
    const Error e = expect_error([&] { runtime_class_manifest(bad); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
    EXPECT_CONTAINS(e.what(), "--handler");
  }
}

TEST(K8sRender, PlansLikeGpuRunAndPrintsJsonOrYaml) {
  K8sOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "4";
  o.container = "pytorch";
  o.format = "json";
  const std::string out = render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env);
  const json patch = json::parse(out);
  const json& vol = patch["spec"]["volumes"][0];
  EXPECT_EQ(vol["emptyDir"]["medium"], "Memory");
  // The same plan as `plan` makes.
  PlanOptions po;
  po.sizing.profile = "imagenet";
  po.sizing.gpus = "2";
  po.sizing.workers = "4";
  const ShmPlan plan = make_plan(po, Config{}, host_with_cpus(8), builtin_only_env);
  // The plan in GPU_RUN_SHM_SIZE; the sizeLimit, the guard's ceiling, in GPU_RUN_SHM_LIMIT too.
  const json& env = patch["spec"]["containers"][0]["env"];
  EXPECT_EQ(env[4], json({{"name", "GPU_RUN_SHM_SIZE"}, {"value", engine_size(plan.shm)}}));
  EXPECT_EQ(env[5]["name"], "GPU_RUN_SHM_LIMIT");
  EXPECT_EQ(vol["emptyDir"]["sizeLimit"], k8s_quantity(parse_size(env[5]["value"].get<std::string>())));
  EXPECT_GT(parse_size(env[5]["value"].get<std::string>()), plan.shm);
  o.format = "yaml";
  const std::string yaml = render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_EQ(yaml.rfind("# gpu-run-ctl k8s:", 0), 0u);
  EXPECT_CONTAINS(yaml, "      emptyDir:\n        medium: \"Memory\"\n");
  o.format = "xml";
  EXPECT_CONTAINS(expect_error([&] { render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env); }).what(),
                  "--format");
  o.format = "json";
  o.sizing.gpus = "two";
  EXPECT_CONTAINS(expect_error([&] { render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env); }).what(), "--gpus");
}

TEST(K8sRender, PlansTheServingBuiltIns) {
  // gpu-run-ctl k8s calls the same core as plan and the webhook: vllm with 4 GPUs is 1356 MiB
  // (tests/unit/core/builtin_profiles_test.cpp works it by hand).
  K8sOptions o;
  o.sizing.profile = "vllm";
  o.sizing.gpus = "4";
  o.container = "vllm";
  o.format = "json";
  const json patch = json::parse(render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env));
  bool found = false;
  for (const json& e : patch["spec"]["containers"][0]["env"])
    if (e["name"] == "GPU_RUN_SHM_SIZE") {
      EXPECT_EQ(e["value"], "1356m");
      found = true;
    }
  EXPECT_TRUE(found) << patch.dump();
  // ray-worker needs the container's memory limit for Ray's default store, which k8s does not plan
  // with (its --memory is the base it raises by /dev/shm's size): refused with what to set.
  o.sizing.profile = "ray-worker";
  o.sizing.gpus = "1";
  o.memory = "64Gi";
  EXPECT_CONTAINS(expect_error([&] { render_k8s(o, Config{}, host_with_cpus(8), builtin_only_env); }).what(),
                  "or set engines.ray.object_store_memory in the profile");
}

}  // namespace
}  // namespace gpurun
