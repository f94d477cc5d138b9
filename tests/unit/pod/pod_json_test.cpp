#include "pod/pod_json.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

json with_resources(const json& limits, const json& requests = json::object()) {
  return {{"name", "train"}, {"resources", {{"limits", limits}, {"requests", requests}}}};
}

TEST(PodJson, AMissingOrMistypedFieldReadsAsAbsent) {
  const json pod = {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", "not an array"}}}, {"n", 7}};
  ASSERT_NE(member(pod, "metadata"), nullptr);
  EXPECT_EQ(member(pod, "status"), nullptr);
  EXPECT_EQ(member(json::array({1}), "metadata"), nullptr) << "not an object";
  EXPECT_EQ(string_at(pod["metadata"], "name"), "p");
  EXPECT_EQ(string_at(pod, "n"), "") << "a number is not a string";
  EXPECT_EQ(string_at(pod, "absent"), "");
  EXPECT_TRUE(array_at(pod["spec"], "containers").empty()) << "a string is not an array";
  EXPECT_TRUE(array_at(pod["spec"], "initContainers").empty());
  EXPECT_EQ(array_at(json{{"a", {1, 2}}}, "a").size(), 2u);
  EXPECT_EQ(container_name(json{{"name", "main"}}), "main");
  EXPECT_EQ(container_name(json{{"name", 3}}), "");
}

TEST(PodJson, GpusFromTheLimitElseTheRequest) {
  EXPECT_EQ(container_gpus(json{{"name", "c"}}), 0u);
  EXPECT_EQ(container_gpus(with_resources({{"nvidia.com/gpu", "2"}}, {{"nvidia.com/gpu", "1"}})), 2u);
  EXPECT_EQ(container_gpus(with_resources(json::object(), {{"nvidia.com/gpu", "4"}})), 4u);
  EXPECT_EQ(container_gpus(with_resources({{"nvidia.com/gpu", 8}})), 8u) << "a number as a manifest writes it";
  EXPECT_CONTAINS(error_of([] { container_gpus(with_resources({{"nvidia.com/gpu", "two"}})); }), "nvidia.com/gpu");
  EXPECT_CONTAINS(error_of([] {
                    container_gpus(with_resources({{"nvidia.com/gpu", json::array()}}));
                  }),
                  "resources.limits.nvidia.com/gpu: expected a quantity string");
}

TEST(PodJson, CpusAsKubernetesWritesThemRoundedDownToAtLeastOne) {
  EXPECT_EQ(container_cpus(json{{"name", "c"}}, 3), 3u) << "neither limit nor request: the fallback";
  EXPECT_EQ(container_cpus(with_resources({{"cpu", "4"}}, {{"cpu", "2"}}), 1), 4u) << "the limit first";
  EXPECT_EQ(container_cpus(with_resources(json::object(), {{"cpu", "2"}}), 1), 2u);
  EXPECT_EQ(container_cpus(with_resources({{"cpu", "2500m"}}), 1), 2u);
  EXPECT_EQ(container_cpus(with_resources({{"cpu", "1.5"}}), 1), 1u);
  EXPECT_EQ(container_cpus(with_resources({{"cpu", "500m"}}), 8), 1u) << "at least one";
  EXPECT_EQ(container_cpus(with_resources({{"cpu", 0.5}}), 8), 1u);
  EXPECT_CONTAINS(error_of([] {
                    container_cpus(with_resources({{"cpu", "lots"}}), 1);
                  }),
                  "container 'train' cpu 'lots': expected a Kubernetes CPU quantity");
}

TEST(PodJson, MemoryPerSectionNamedInErrors) {
  const json c = with_resources({{"memory", "1Gi"}}, {{"memory", "512Mi"}});
  EXPECT_EQ(container_memory(c, "limits"), 1 * kGiB);
  EXPECT_EQ(container_memory(c, "requests"), 512 * kMiB);
  EXPECT_EQ(container_memory(with_resources({{"memory", nullptr}}), "limits"), std::nullopt) << "null is unset";
  EXPECT_EQ(container_memory(json{{"name", "c"}}, "limits"), std::nullopt);
  EXPECT_CONTAINS(error_of([] {
                    container_memory(with_resources({{"memory", "16g"}}), "limits");
                  }),
                  "container 'train' limits.memory");
}

}  // namespace
}  // namespace gpurun
