#include "metrics.hpp"

#include <cstdio>

namespace gpurun {

void WebhookMetrics::record(const std::string& outcome, double seconds) {
  ++reviews_;
  if (outcome == "patched") ++patches_;
  if (outcome == "denied") ++denials_;
  if (outcome == "warned") ++warnings_;
  if (outcome == "error") ++errors_;
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++buckets_[i];
  ++count_;
  sum_ += seconds;
}

std::string WebhookMetrics::render() const {
  std::string out;
  auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(value) + "\n";
  };
  counter("gpu_run_webhook_reviews_total", "AdmissionReviews answered.", reviews_);
  counter("gpu_run_webhook_patches_total", "Reviews answered with a /dev/shm patch.", patches_);
  counter("gpu_run_webhook_denials_total", "Reviews answered with allowed=false.", denials_);
  counter("gpu_run_webhook_warnings_total", "Pods admitted unchanged with a warning.", warnings_);
  counter("gpu_run_webhook_errors_total", "Malformed reviews or failures while reviewing.", errors_);
  std::lock_guard<std::mutex> lock(mutex_);
  const char* h = "gpu_run_webhook_review_duration_seconds";
  out += std::string("# HELP ") + h + " Time to review one AdmissionReview.\n# TYPE " + h + " histogram\n";
  char le[32];
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    std::snprintf(le, sizeof le, "%g", kBuckets[i]);
    out += std::string(h) + "_bucket{le=\"" + le + "\"} " + std::to_string(buckets_[i]) + "\n";
  }
  out += std::string(h) + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9f", sum_);
  out += std::string(h) + "_sum " + sum + "\n" + h + "_count " + std::to_string(count_) + "\n";
  return out;
}

}  // namespace gpurun
