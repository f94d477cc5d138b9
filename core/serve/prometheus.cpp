#include "serve/prometheus.hpp"

#include <charconv>
#include <cmath>

namespace gpurun {
namespace {

std::string escaped(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string prometheus_label_value(std::string_view value) { return escaped(value, true); }

std::string prometheus_help(std::string_view help) { return escaped(help, false); }

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[64];
  const auto end = std::to_chars(text, text + sizeof text, value, std::chars_format::general).ptr;
  return std::string(text, end);
}

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help) {
  out_.append("# HELP ").append(name).append(" ").append(prometheus_help(help)).append("\n");
  out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void PrometheusText::name_and_labels(std::string_view name, const PrometheusLabels& labels) {
  out_.append(name);
  if (labels.empty()) return;
  out_ += '{';
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) out_ += ',';
    out_.append(labels[i].first).append("=\"").append(prometheus_label_value(labels[i].second)).append("\"");
  }
  out_ += '}';
}

void PrometheusText::sample(std::string_view name, const PrometheusLabels& labels, std::uint64_t value) {
  name_and_labels(name, labels);
  out_.append(" ").append(std::to_string(value)).append("\n");
}

void PrometheusText::sample(std::string_view name, const PrometheusLabels& labels, double value) {
  name_and_labels(name, labels);
  out_.append(" ").append(prometheus_number(value)).append("\n");
}

}  // namespace gpurun
