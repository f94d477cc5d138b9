#pragma once

// Prometheus' text exposition format (version 0.0.4), for every door that serves /metrics
// (gpu-run-webhook, gpu-run-ctl guard --metrics): metric families with their HELP and TYPE
// lines, and samples with escaped label values. Pure.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpurun {

// The Content-Type of the text format.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped for the text format: backslash, double quote and line feed.
std::string prometheus_label_value(std::string_view value);

// A HELP text escaped for the text format: backslash and line feed.
std::string prometheus_help(std::string_view help);

// A float value (or an `le` bound): the shortest text that reads back the same, NaN, +Inf, -Inf.
std::string prometheus_number(double value);

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

// Builds one exposition: family() starts a metric family (its HELP and TYPE lines), sample()
// adds one line to it. Names and label names are the caller's constants ([a-zA-Z_:][a-zA-Z0-9_:]*).
class PrometheusText {
 public:
  // TYPE: counter, gauge, histogram, summary or untyped.
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const PrometheusLabels& labels, std::uint64_t value);
  void sample(std::string_view name, const PrometheusLabels& labels, double value);

  const std::string& text() const { return out_; }

 private:
  void name_and_labels(std::string_view name, const PrometheusLabels& labels);
  std::string out_;
};

}  // namespace gpurun
