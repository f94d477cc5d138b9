#include "webhook/metrics.hpp"

#include <gtest/gtest.h>

#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(WebhookMetricsTest, CountsOutcomesAndBucketsLatencies) {
  WebhookMetrics m;
  m.record(ReviewOutcome::kPatched, 0.0004);
  m.record(ReviewOutcome::kDenied, 0.02);
  m.record(ReviewOutcome::kError, 2.0);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE gpu_run_webhook_reviews_total counter\ngpu_run_webhook_reviews_total 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpu_run_webhook_patches_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_denials_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_errors_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpu_run_webhook_review_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_review_duration_seconds_bucket{le=\"0.0005\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_review_duration_seconds_bucket{le=\"0.025\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_review_duration_seconds_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_review_duration_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_webhook_review_duration_seconds_sum 2.0204\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_run_webhook_review_duration_seconds_count 3\n"), std::string::npos);
}

TEST(WebhookMetricsTest, CountersAndHistogram) {
  WebhookMetrics m;
  m.record(ReviewOutcome::kPatched, 0.0004);
  m.record(ReviewOutcome::kDenied, 0.003);
  m.record(ReviewOutcome::kError, 2.0);
  const std::string text = m.render();
  EXPECT_CONTAINS(text, "gpu_run_webhook_reviews_total 3\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_patches_total 1\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_denials_total 1\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_errors_total 1\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_review_duration_seconds_bucket{le=\"0.0005\"} 1\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_review_duration_seconds_bucket{le=\"0.005\"} 2\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_review_duration_seconds_bucket{le=\"+Inf\"} 3\n");
  EXPECT_CONTAINS(text, "gpu_run_webhook_review_duration_seconds_count 3\n");
}

}  // namespace
}  // namespace gpurun
