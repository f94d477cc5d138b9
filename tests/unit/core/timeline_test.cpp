#include "shm/timeline.hpp"

#include <gtest/gtest.h>

#include <regex>

#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(Timeline, KeepsEveryPointWhileThereIsRoom) {
  Timeline t(100);
  for (int i = 0; i < 50; ++i) t.add(i * 0.01, 64 * kMiB, static_cast<std::uint64_t>(i) * kMiB);
  ASSERT_EQ(t.points().size(), 50u);
  EXPECT_EQ(t.points()[49].used, 49 * kMiB);
  EXPECT_DOUBLE_EQ(t.points()[49].seconds, 0.49);
}

TEST(Timeline, AnHourAt100HzStaysBoundedAndKeepsThePeak) {
  Timeline t(4096);
  const int samples = 360000;
  for (int i = 0; i < samples; ++i) {
    const std::uint64_t used = i == 123457 ? 900 * kMiB : static_cast<std::uint64_t>(i % 100) * kMiB;
    const std::uint64_t size = i < 200000 ? 512 * kMiB : 1024 * kMiB;  // grown mid-run
    t.add(i * 0.01, size, used);
  }
  EXPECT_LE(t.points().size(), 4096u);
  EXPECT_GE(t.points().size(), 2048u);
  std::uint64_t peak = 0, largest = 0;
  for (const auto& p : t.points()) {
    peak = std::max(peak, p.used);
    largest = std::max(largest, p.size);
  }
  EXPECT_EQ(peak, 900 * kMiB);  // a single sample's peak survives every merge
  EXPECT_EQ(largest, 1024 * kMiB);
  for (std::size_t i = 1; i < t.points().size(); ++i) EXPECT_LT(t.points()[i - 1].seconds, t.points()[i].seconds);
}

TEST(Timeline, SvgShowsUseSizePeakAndAxes) {
  std::vector<TimelinePoint> pts;
  for (int i = 0; i <= 100; ++i)
    pts.push_back({i * 0.1, 256 * kMiB, static_cast<std::uint64_t>(i < 60 ? i * 3 : 180 - (i - 60)) * kMiB});
  const std::string svg = timeline_svg(pts, "imagenet <2 GPUs> & co");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_CONTAINS(svg, "</svg>");
  EXPECT_CONTAINS(svg, "imagenet &lt;2 GPUs&gt; &amp; co");  // the title is escaped
  EXPECT_CONTAINS(svg, "peak 180MiB at 6s (70% of 256MiB)");
  EXPECT_CONTAINS(svg, ">256MiB</text>");  // a y tick at the size
  EXPECT_CONTAINS(svg, ">10s</text>");     // the last x tick
  EXPECT_CONTAINS(svg, "/dev/shm size");
  // Every tag opened is closed: a crude well-formedness check without an XML parser.
  const std::regex open("<(svg|text)[ >]"), close("</(svg|text)>");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), open), std::sregex_iterator()),
            std::distance(std::sregex_iterator(svg.begin(), svg.end(), close), std::sregex_iterator()));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(Timeline, EmptyAndDegenerateTimelines) {
  EXPECT_CONTAINS(timeline_svg({}, "t"), "no /dev/shm samples");
  const std::string one = timeline_svg({{0, 0, 0}}, "t");  // one sample, all zero: no division by zero
  EXPECT_EQ(one.find("nan"), std::string::npos);
  EXPECT_CONTAINS(one, "peak 0B at 0s");
  const std::string ctl = timeline_svg({{0, kMiB, 0}}, std::string("a\x01\x1b[31mb", 8));
  EXPECT_CONTAINS(ctl, ">a  [31mb</text>");  // control bytes never reach the XML
}

}  // namespace
}  // namespace gpurun
