#include "clock.hpp"

#include <gtest/gtest.h>

namespace gpurun {
namespace {

TEST(ClockTest, UtcTimestamp) {
  EXPECT_EQ(utc_timestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_timestamp(1796226488), "2026-12-02T15:48:08Z");
}

}  // namespace
}  // namespace gpurun
