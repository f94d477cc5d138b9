#pragma once

// /dev/shm size and use over time, and its picture: an SVG a browser or an image viewer shows
// without any other tool (`gpu-run --record --timeline FILE.svg`, `gpu-run-ctl watch
// --timeline FILE.svg`).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpurun {

struct TimelinePoint {
  double seconds = 0;      // since the first sample
  std::uint64_t size = 0;  // the tmpfs size, bytes
  std::uint64_t used = 0;  // bytes in use
};

// Samples at any rate for any length of time in bounded memory: past `max_points` it merges
// neighbours pairwise, keeping the higher use and size of each pair, so the peak survives.
class Timeline {
 public:
  explicit Timeline(std::size_t max_points = 4096) : max_points_(max_points < 16 ? 16 : max_points) {}

  void add(double seconds, std::uint64_t size, std::uint64_t used);
  const std::vector<TimelinePoint>& points() const { return points_; }

 private:
  std::size_t max_points_;
  std::size_t stride_ = 1;   // samples per point now
  std::size_t pending_ = 0;  // samples merged into the last point so far
  std::vector<TimelinePoint> points_;
};

// The picture: use as a filled area, the size as a line, the peak marked and labelled, axes
// in seconds and bytes, `title` on top. Pure; an empty timeline gives a picture that says so.
std::string timeline_svg(const std::vector<TimelinePoint>& points, const std::string& title);

// Writes timeline_svg to `path` atomically. Throws Error naming the path.
void write_timeline_svg(const std::string& path, const std::vector<TimelinePoint>& points, const std::string& title);

}  // namespace gpurun
