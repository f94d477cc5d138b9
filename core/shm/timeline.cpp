#include "shm/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/fd.hpp"
#include "base/units.hpp"

namespace gpurun {
namespace {

constexpr double kWidth = 800, kHeight = 380;
constexpr double kLeft = 78, kRight = 24, kTop = 48, kBottom = 52;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control bytes are not allowed in XML 1.0.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t') ? ' ' : c;
    }
  }
  return out;
}

// A round step for an axis from 0 to `max` with about `ticks` ticks: 1, 2 or 5 x 10^n.
double nice_step(double max, int ticks) {
  if (max <= 0) return 1;
  const double raw = max / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// Byte axis steps in binary units: 1, 2, 4, 8, 16... x KiB/MiB/GiB.
std::uint64_t byte_step(std::uint64_t max, int ticks) {
  std::uint64_t step = 1024;
  while (step * static_cast<std::uint64_t>(ticks) < max && step < (1ull << 62)) step *= 2;
  return step;
}

std::string seconds_label(double s) {
  if (s >= 3600) return num(s / 3600) + "h";
  if (s >= 120) return num(s / 60) + "min";
  char buf[32];
  const bool whole = std::fabs(s - std::round(s)) < 1e-6;
  std::snprintf(buf, sizeof buf, whole || s >= 10 ? "%.0fs" : "%.1fs", s);
  return buf;
}

}  // namespace

void Timeline::add(double seconds, std::uint64_t size, std::uint64_t used) {
  if (pending_ > 0 && pending_ < stride_) {
    TimelinePoint& last = points_.back();
    last.size = std::max(last.size, size);
    last.used = std::max(last.used, used);
    ++pending_;
    return;
  }
  points_.push_back({seconds, size, used});
  pending_ = 1;
  if (points_.size() <= max_points_) return;
  // Merge neighbours: every point now stands for twice as many samples.
  std::vector<TimelinePoint> merged;
  merged.reserve(points_.size() / 2 + 1);
  for (std::size_t i = 0; i < points_.size(); i += 2) {
    TimelinePoint p = points_[i];
    if (i + 1 < points_.size()) {
      p.size = std::max(p.size, points_[i + 1].size);
      p.used = std::max(p.used, points_[i + 1].used);
    }
    merged.push_back(p);
  }
  points_ = std::move(merged);
  stride_ *= 2;
  pending_ = stride_;  // the next sample starts a new point
}

std::string timeline_svg(const std::vector<TimelinePoint>& points, const std::string& title) {
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
                    "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
                    "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(kLeft) + "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) +
         "</text>\n";
  if (points.empty()) {
    svg += "<text x=\"" + num(kWidth / 2) + "\" y=\"" + num(kHeight / 2) +
           "\" text-anchor=\"middle\">no /dev/shm samples: the container ended before the first one</text>\n</svg>\n";
    return svg;
  }
  const double t_end = std::max(points.back().seconds, 1e-3);
  std::uint64_t top = 1;
  std::size_t peak_at = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    top = std::max({top, points[i].size, points[i].used});
    if (points[i].used > points[peak_at].used) peak_at = i;
  }
  const std::uint64_t ystep = byte_step(top, 5);
  const std::uint64_t ymax = ((top + ystep - 1) / ystep) * ystep;
  const double xstep = nice_step(t_end, 8);
  const double xmax = std::ceil(t_end / xstep) * xstep;
  auto X = [&](double s) { return kLeft + plot_w * (s / xmax); };
  auto Y = [&](std::uint64_t b) { return kTop + plot_h * (1.0 - static_cast<double>(b) / static_cast<double>(ymax)); };

  // Grid and axes.
  for (std::uint64_t b = 0; b <= ymax; b += ystep) {
    svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + plot_w) + "\" y1=\"" + num(Y(b)) + "\" y2=\"" +
           num(Y(b)) + "\" stroke=\"#e3e3e3\"/>\n";
    svg += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(Y(b) + 4) + "\" text-anchor=\"end\">" +
           (b == 0 ? std::string("0") : format_size(b)) + "</text>\n";
  }
  for (double s = 0; s <= xmax + xstep / 2; s += xstep)
    svg += "<text x=\"" + num(X(s)) + "\" y=\"" + num(kTop + plot_h + 18) + "\" text-anchor=\"middle\">" +
           seconds_label(s) + "</text>\n";
  svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" y2=\"" +
         num(kTop + plot_h) + "\" stroke=\"#444\"/>\n";
  svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + plot_w) + "\" y1=\"" + num(kTop + plot_h) + "\" y2=\"" +
         num(kTop + plot_h) + "\" stroke=\"#444\"/>\n";
  svg += "<text x=\"" + num(kLeft + plot_w / 2) + "\" y=\"" + num(kHeight - 12) +
         "\" text-anchor=\"middle\" fill=\"#444\">time since the first sample</text>\n";

  // Use: a filled area; size: a step line.
  std::string area = "M" + num(X(points.front().seconds)) + "," + num(Y(0));
  for (const TimelinePoint& p : points) area += " L" + num(X(p.seconds)) + "," + num(Y(p.used));
  area += " L" + num(X(points.back().seconds)) + "," + num(Y(0)) + " Z";
  svg += "<path d=\"" + area + "\" fill=\"#4a90d9\" fill-opacity=\"0.45\" stroke=\"#2a6cb0\" stroke-width=\"1.2\"/>\n";
  std::string size_line;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string y = num(Y(points[i].size));
    if (i == 0)
      size_line = "M" + num(X(points[i].seconds)) + "," + y;
    else
      size_line += " H" + num(X(points[i].seconds)) + " V" + y;
  }
  svg +=
      "<path d=\"" + size_line + "\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n";

  // The peak.
  const TimelinePoint& peak = points[peak_at];
  const double px = X(peak.seconds), py = Y(peak.used);
  const std::string label =
      "peak " + format_size(peak.used) + " at " + seconds_label(peak.seconds) +
      (peak.size ? " (" +
                       std::to_string(static_cast<int>(
                           std::lround(100.0 * static_cast<double>(peak.used) / static_cast<double>(peak.size)))) +
                       "% of " + format_size(peak.size) + ")"
                 : "");
  svg += "<circle cx=\"" + num(px) + "\" cy=\"" + num(py) + "\" r=\"5\" fill=\"#2a6cb0\" stroke=\"white\"/>\n";
  const bool right_half = px > kLeft + plot_w * 0.6;
  svg += "<text x=\"" + num(right_half ? px - 9 : px + 9) + "\" y=\"" + num(std::max(py - 9, kTop + 12)) +
         "\" text-anchor=\"" + (right_half ? "end" : "start") + "\" font-weight=\"bold\" fill=\"#1d4f85\">" +
         xml_escape(label) + "</text>\n";

  // Legend.
  const double lx = kLeft + plot_w - 230, ly = 29;  // under the title, over the plot
  svg += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) +
         "\" width=\"14\" height=\"10\" fill=\"#4a90d9\" fill-opacity=\"0.45\" stroke=\"#2a6cb0\"/>\n";
  svg += "<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 9) + "\">used</text>\n";
  svg += "<line x1=\"" + num(lx + 70) + "\" x2=\"" + num(lx + 92) + "\" y1=\"" + num(ly + 5) + "\" y2=\"" +
         num(ly + 5) + "\" stroke=\"#c0392b\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n";
  svg += "<text x=\"" + num(lx + 98) + "\" y=\"" + num(ly + 9) + "\">/dev/shm size</text>\n";
  svg += "</svg>\n";
  return svg;
}

void write_timeline_svg(const std::string& path, const std::vector<TimelinePoint>& points, const std::string& title) {
  write_file_atomic(path, timeline_svg(points, title), 0644, Durability::kDurable);
}

}  // namespace gpurun
