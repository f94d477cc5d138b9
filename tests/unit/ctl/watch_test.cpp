#include "ctl/watch.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/units.hpp"
#include "shm/shm_sampler.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(WatchTest, BarAndJsonLines) {
  const ShmUsage u{100 * kMiB, 25 * kMiB};
  const std::string line = watch_bar_line(u, 50 * kMiB, 1.25, 20);
  EXPECT_CONTAINS(line, "[#####....|..........]");
  EXPECT_CONTAINS(line, "25MiB / 100MiB");
  EXPECT_CONTAINS(line, "peak 50MiB");
  const auto j = nlohmann::json::parse(watch_sample_json(0.5, u, 50 * kMiB));
  EXPECT_EQ(j["event"], "sample");
  EXPECT_EQ(j["used"], 25 * kMiB);
  EXPECT_EQ(j["size"], 100 * kMiB);
  EXPECT_EQ(j["peak"], 50 * kMiB);
  ShmSampleStats s;
  s.peak = 50 * kMiB;
  s.size = 100 * kMiB;
  s.samples = 101;
  s.seconds = 1.0;
  const auto sum = watch_summary_json("c1", s, true);
  EXPECT_EQ(sum["event"], "summary");
  EXPECT_EQ(sum["rate_hz"], 100.0);
  EXPECT_EQ(sum["peak_fraction"], 0.5);
  EXPECT_CONTAINS(watch_summary_text("c1", s, true),
                  "container c1 exited: peak /dev/shm 50MiB of 100MiB (50.0%), 101 samples");
}

}  // namespace
}  // namespace gpurun
