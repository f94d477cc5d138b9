#include "pod/webhook_config.hpp"

#include <gtest/gtest.h>

#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(WebhookConfigTest, ParsesAndRefuses) {
  const WebhookConfig c = parse_webhook_config(
      R"({"policy": "deny", "memory_fraction_max": 0.4, "profile_dirs": ["/p"], "default_cpus": 4})", "c.json");
  EXPECT_EQ(c.policy, WebhookPolicy::kDeny);
  EXPECT_DOUBLE_EQ(c.memory_fraction_max, 0.4);
  ASSERT_EQ(c.profile_dirs.size(), 1u);
  EXPECT_EQ(c.default_cpus, 4u);
  EXPECT_CONTAINS(expect_error([] { parse_webhook_config(R"({"policy": "maybe"})", "c.json"); }).what(),
                  "c.json: policy");
  EXPECT_CONTAINS(expect_error([] { parse_webhook_config(R"({"polcy": "deny"})", "c.json"); }).what(), "unknown key");
  EXPECT_CONTAINS(expect_error([] { parse_webhook_config("{", "c.json"); }).what(), "JSON object");
}

TEST(WebhookConfigTest, NamespaceProfiles) {
  const WebhookConfig c =
      parse_webhook_config(R"({"namespace_profiles": {"ml-team": "imagenet", "vision": "team-a/detector"}})", "c.json");
  ASSERT_EQ(c.namespace_profiles.size(), 2u);
  EXPECT_EQ(c.namespace_profiles.at("ml-team"), "imagenet");
  EXPECT_EQ(c.namespace_profiles.at("vision"), "team-a/detector");
  EXPECT_TRUE(parse_webhook_config("{}", "c.json").namespace_profiles.empty());
  EXPECT_CONTAINS(expect_error([] { parse_webhook_config(R"({"namespace_profiles": ["ml"]})", "c.json"); }).what(),
                  "c.json: namespace_profiles: expected an object");
  EXPECT_CONTAINS(
      expect_error([] { parse_webhook_config(R"({"namespace_profiles": {"ML_Team": "imagenet"}})", "c.json"); }).what(),
      "'ML_Team' is not a namespace name");
  EXPECT_CONTAINS(
      expect_error([] { parse_webhook_config(R"({"namespace_profiles": {"ml": "../etc/passwd"}})", "c.json"); }).what(),
      "c.json: namespace_profiles.ml: expected a profile name");
  EXPECT_CONTAINS(expect_error([] { parse_webhook_config(R"({"namespace_profiles": {"ml": 3}})", "c.json"); }).what(),
                  "expected a profile name");
  EXPECT_EQ(expect_error([] { parse_webhook_config(R"({"namespace_profiles": {"ml": ""}})", "c.json"); }).exit_code(),
            kExitUsage);
}

}  // namespace
}  // namespace gpurun
