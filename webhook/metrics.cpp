#include "webhook/metrics.hpp"

#include "serve/prometheus.hpp"

namespace gpurun {

void WebhookMetrics::record(ReviewOutcome outcome, double seconds) {
  ++reviews_;
  if (outcome == ReviewOutcome::kPatched) ++patches_;
  if (outcome == ReviewOutcome::kDenied) ++denials_;
  if (outcome == ReviewOutcome::kWarned) ++warnings_;
  if (outcome == ReviewOutcome::kError) ++errors_;
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++buckets_[i];
  ++count_;
  sum_ += seconds;
}

std::string WebhookMetrics::render() const {
  PrometheusText out;
  auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    out.family(name, "counter", help);
    out.sample(name, {}, value);
  };
  counter("gpu_run_webhook_reviews_total", "AdmissionReviews answered.", reviews_);
  counter("gpu_run_webhook_patches_total", "Reviews answered with a /dev/shm patch.", patches_);
  counter("gpu_run_webhook_denials_total", "Reviews answered with allowed=false.", denials_);
  counter("gpu_run_webhook_warnings_total", "Pods admitted unchanged with a warning.", warnings_);
  counter("gpu_run_webhook_errors_total", "Malformed reviews or failures while reviewing.", errors_);
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string h = "gpu_run_webhook_review_duration_seconds";
  out.family(h, "histogram", "Time to review one AdmissionReview.");
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    out.sample(h + "_bucket", {{"le", prometheus_number(kBuckets[i])}}, buckets_[i]);
  out.sample(h + "_bucket", {{"le", "+Inf"}}, count_);
  out.sample(h + "_sum", {}, sum_);
  out.sample(h + "_count", {}, count_);
  return out.text();
}

}  // namespace gpurun
