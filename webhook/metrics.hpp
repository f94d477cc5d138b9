#pragma once

// gpu-run-webhook's /metrics: counters and a latency histogram in Prometheus' text format.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "pod/pod_review.hpp"

namespace gpurun {

class WebhookMetrics {
 public:
  // Upper bounds of the latency buckets, in seconds.
  static constexpr std::array<double, 10> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};

  // Counts one review with its outcome.
  void record(ReviewOutcome outcome, double seconds);

  // The exposition text (version 0.0.4).
  std::string render() const;

 private:
  std::atomic<std::uint64_t> reviews_{0}, patches_{0}, denials_{0}, warnings_{0}, errors_{0};
  mutable std::mutex mutex_;
  std::array<std::uint64_t, kBuckets.size()> buckets_{};
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace gpurun
