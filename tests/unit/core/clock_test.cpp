#include "base/clock.hpp"

#include <gtest/gtest.h>

namespace gpurun {
namespace {

TEST(ClockTest, UtcTimestamp) {
  EXPECT_EQ(utc_timestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_timestamp(1796226488), "2026-12-02T15:48:08Z");
}

TEST(ClockTest, AgreesWithGmtimeAcrossLeapYearsCenturiesAndBeforeTheEpoch) {
  // Every day from 1900 to 2400 at a second that moves through the day, against the C library.
  for (std::time_t t = -2208988800; t < 13569465600; t += 86400 + 3607) {
    struct tm tm {};
    ASSERT_NE(::gmtime_r(&t, &tm), nullptr);
    char want[48];
    std::strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%SZ", &tm);
    ASSERT_EQ(utc_timestamp(t), want) << t;
  }
  EXPECT_EQ(utc_timestamp(951782400), "2000-02-29T00:00:00Z");
  EXPECT_EQ(utc_timestamp(-1), "1969-12-31T23:59:59Z");
}

}  // namespace
}  // namespace gpurun
