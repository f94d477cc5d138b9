#include "base/k8s_quantity.hpp"

#include <gtest/gtest.h>

#include "support/test_util.hpp"

namespace gpurun {
namespace {

// parse_k8s_quantity and k8s_quantity are tested where gpu-run-ctl k8s uses them
// (tests/unit/ctl/k8s_test.cpp); the CPU quantities the webhook reads are tested here.
TEST(K8sCpus, WholeFractionalAndMilliCpusRoundDownToAtLeastOne) {
  EXPECT_EQ(parse_k8s_cpus("4", "cpu"), 4u);
  EXPECT_EQ(parse_k8s_cpus("1.5", "cpu"), 1u);
  EXPECT_EQ(parse_k8s_cpus("3500m", "cpu"), 3u);
  EXPECT_EQ(parse_k8s_cpus("500m", "cpu"), 1u);
  EXPECT_EQ(parse_k8s_cpus("0", "cpu"), 1u);
}

TEST(K8sCpus, RejectsOtherSyntaxNamingWhat) {
  for (const char* bad : {"", "lots", "-1", "1.5m", "4 ", "1e3", "99999999999999999999"})
    EXPECT_CONTAINS(expect_error([&] { parse_k8s_cpus(bad, "container 'x' cpu"); }).what(), "container 'x' cpu");
}

TEST(K8sQuantity, LongInputIsRefusedBeforeTheRegex) {
  EXPECT_CONTAINS(expect_error([] { parse_k8s_quantity(std::string(100000, '1'), "memory"); }).what(),
                  "expected a Kubernetes memory quantity");
}

TEST(K8sDnsLabelTest, Rfc1123Labels) {
  EXPECT_TRUE(is_k8s_dns_label("ml"));
  EXPECT_TRUE(is_k8s_dns_label("team-a-2"));
  EXPECT_TRUE(is_k8s_dns_label("0abc"));
  EXPECT_TRUE(is_k8s_dns_label(std::string(63, 'a')));
  EXPECT_FALSE(is_k8s_dns_label(std::string(64, 'a')));
  EXPECT_FALSE(is_k8s_dns_label(""));
  EXPECT_FALSE(is_k8s_dns_label("-ml"));
  EXPECT_FALSE(is_k8s_dns_label("ml-"));
  EXPECT_FALSE(is_k8s_dns_label("ML"));
  EXPECT_FALSE(is_k8s_dns_label("a.b"));
  EXPECT_FALSE(is_k8s_dns_label(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace gpurun
