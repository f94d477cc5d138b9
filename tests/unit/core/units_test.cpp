#include "base/units.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// The message of the Error thrown by `f`, or "" when nothing is thrown.
TEST(ParseSize, PlainBytes) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("512"), 512u);
  EXPECT_EQ(parse_size("1b"), 1u);
  EXPECT_EQ(parse_size("4096B"), 4096u);
}

TEST(ParseSize, DockerUnitsAre1024BasedAndCaseInsensitive) {
  EXPECT_EQ(parse_size("1k"), 1024u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("64m"), 67108864u);  // 64 * 1024 * 1024
  EXPECT_EQ(parse_size("64M"), 67108864u);
  EXPECT_EQ(parse_size("2g"), 2147483648u);  // 2 * 1024^3
  EXPECT_EQ(parse_size("2G"), 2147483648u);
  EXPECT_EQ(parse_size("1t"), 1099511627776u);  // 1024^4
  EXPECT_EQ(parse_size("3T"), 3298534883328u);  // 3 * 1024^4
}

TEST(ParseSize, DockerStyleByteSuffixAndSpace) {
  EXPECT_EQ(parse_size("1kb"), 1024u);
  EXPECT_EQ(parse_size("1MB"), 1048576u);
  EXPECT_EQ(parse_size("1 g"), 1073741824u);
}

TEST(ParseSize, IecUnits) {
  EXPECT_EQ(parse_size("1Ki"), 1024u);
  EXPECT_EQ(parse_size("8Mi"), 8388608u);  // 8 * 1048576
  EXPECT_EQ(parse_size("1Gi"), 1073741824u);
  EXPECT_EQ(parse_size("2Ti"), 2199023255552u);  // 2 * 1024^4
  EXPECT_EQ(parse_size("1KiB"), 1024u);
  EXPECT_EQ(parse_size("256MiB"), 268435456u);  // 256 * 1048576
  EXPECT_EQ(parse_size("1gib"), 1073741824u);
}

TEST(ParseSize, Fractions) {
  EXPECT_EQ(parse_size("1.5g"), 1610612736u);  // 1073741824 + 536870912
  EXPECT_EQ(parse_size("0.5k"), 512u);
  EXPECT_EQ(parse_size("2.25m"), 2359296u);  // 2 * 1048576 + 262144
  EXPECT_EQ(parse_size("0.001k"), 1u);       // 1.024 bytes, truncated to 1
}

TEST(ParseSize, LargestValues) {
  // 2^64 / 2^40 = 2^24 = 16777216, so 16777215t is the largest whole number of TiB.
  EXPECT_EQ(parse_size("16777215t"), 16777215ull * 1099511627776ull);
  EXPECT_EQ(parse_size("18446744073709551615"), kMax);
}

TEST(ParseSize, Errors) {
  EXPECT_NE(error_of([] { parse_size("2x"); }).find("unknown unit"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("-1g"); }).find("negative"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("+1g"); }).find("sign"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("99999999t"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("16777216t"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("18446744073709551616"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("99999999999999999999999999"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size(""); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("1."); }).find("no digits after '.'"), std::string::npos);
  // A leading '.' is not a number, as in Docker's regular expression.
  EXPECT_NE(error_of([] { parse_size(".5g"); }).find("no number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("g"); }).find("no number"), std::string::npos);
  // 0.0000001 KiB = 0.0001024 bytes: non-zero, but nothing once rounded.
  EXPECT_NE(error_of([] { parse_size("0.0000001k"); }).find("rounds to 0"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("0.5b"); }).find("rounds to 0"), std::string::npos);
  // The only non-zero digit is past the 18 fraction digits kept: still not zero.
  EXPECT_NE(error_of([] { parse_size("0.0000000000000000001t"); }).find("rounds to 0"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("1gx"); }).find("trailing"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("1g "); }).find("trailing"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("1bb"); }).find("trailing"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size("1.5.5g"); }).find("unknown unit"), std::string::npos);
  EXPECT_NE(error_of([] { parse_size(std::string("1\0g", 3)); }).find("\\x00"), std::string::npos);
}

TEST(ParseSize, ZeroSpelledOtherwiseIsZero) {
  EXPECT_EQ(parse_size("0g"), 0u);
  EXPECT_EQ(parse_size("0.0m"), 0u);
}

TEST(ParseSize, ErrorNamesWhatAndText) {
  std::string m = error_of([] { parse_size("12q", "--shm-size"); });
  EXPECT_EQ(m.rfind("--shm-size: invalid size '12q'", 0), 0u) << m;
  EXPECT_NE(m.find("e.g. 512m"), std::string::npos) << m;
}

TEST(ParseSize, ErrorIsUsageError) {
  try {
    parse_size("nope");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}

TEST(FormatSize, ForPeople) {
  EXPECT_EQ(format_size(0), "0B");
  EXPECT_EQ(format_size(512), "512B");
  EXPECT_EQ(format_size(1023), "1023B");
  EXPECT_EQ(format_size(1024), "1KiB");
  EXPECT_EQ(format_size(1536), "1.5KiB");  // 1.5 * 1024
  EXPECT_EQ(format_size(67108864), "64MiB");
  EXPECT_EQ(format_size(1610612736), "1.5GiB");
  EXPECT_EQ(format_size(3ull << 40), "3TiB");
  // 1048575 B = 1023.999 KiB: shown in the next unit rather than as "1024KiB".
  EXPECT_EQ(format_size(1048575), "1MiB");
  // A size that rounds to a whole number reads as one, whether or not it is exact: a sum and
  // its terms look alike (plan's "batch_bytes = 147MiB = image 147MiB + label 4KiB").
  EXPECT_EQ(format_size(147 * kMiB + 4 * kKiB), "147MiB");
  EXPECT_EQ(format_size(147 * kMiB), "147MiB");
}

TEST(EngineSize, WholeMebibytesOrBytes) {
  EXPECT_EQ(log_size(64 * kMiB), "64m");
  EXPECT_EQ(log_size(65536000), "62.5m");
  EXPECT_EQ(log_size(4096), "0m") << "below 0.05 MiB";
  EXPECT_EQ(log_size(kMiB + 1), "1m");
  EXPECT_EQ(engine_size(0), "0m");
  EXPECT_EQ(engine_size(67108864), "64m");
  EXPECT_EQ(engine_size(2147483648), "2048m");
  EXPECT_EQ(engine_size(1048577), "1048577b");
  EXPECT_EQ(engine_size(1000), "1000b");
}

TEST(ExactSize, TheLargestUnitThatDividesIt) {
  EXPECT_EQ(exact_size(0), "0");
  EXPECT_EQ(exact_size(256 * kGiB), "256g");
  EXPECT_EQ(exact_size(1536 * kMiB), "1536m");
  EXPECT_EQ(exact_size(2 * kTiB), "2t");
  EXPECT_EQ(exact_size(4 * kKiB), "4k");
  EXPECT_EQ(exact_size(1000), "1000b");
  for (std::uint64_t v :
       std::initializer_list<std::uint64_t>{0, 1, 1000, 4096, 256 * kGiB, 1536 * kMiB, 3 * kTiB + kKiB})
    EXPECT_EQ(parse_size(exact_size(v)), v) << exact_size(v);
}

TEST(EngineSize, RoundTripsThroughParseSize) {
  for (std::uint64_t v : {0ull, 1ull, 4096ull, 1048576ull, 1048577ull, 434110464ull, 5ull << 40}) {
    EXPECT_EQ(parse_size(engine_size(v)), v) << engine_size(v);
  }
}

TEST(RoundUp, Basics) {
  EXPECT_EQ(round_up(0, 4096), 0u);
  EXPECT_EQ(round_up(1, 4096), 4096u);
  EXPECT_EQ(round_up(4096, 4096), 4096u);
  EXPECT_EQ(round_up(4097, 4096), 8192u);
  EXPECT_EQ(round_up(7, 0), 7u);
  EXPECT_EQ(round_up(kMax, 4096), kMax);  // saturates
  EXPECT_EQ(round_up(kMax - 4095, 1048576), kMax);
}

TEST(ParseCount, Accepts) {
  EXPECT_EQ(parse_count("0", "n"), 0u);
  EXPECT_EQ(parse_count("42", "n"), 42u);
  EXPECT_EQ(parse_count("007", "n"), 7u);
  EXPECT_EQ(parse_count("1048576", "n"), 1048576u);  // the default max, 1 << 20
  EXPECT_EQ(parse_count("18446744073709551615", "n", kMax), kMax);
}

TEST(ParseCount, Errors) {
  EXPECT_NE(error_of([] { parse_count("-3", "--workers"); }).find("negative"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("0x", "--workers"); }).find("whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("abc", "--workers"); }).find("whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("", "--workers"); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count(" 1", "--workers"); }).find("whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("1.5", "--workers"); }).find("whole number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("1048577", "--workers"); }).find("more than 1048576"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("9", "--gpus", 8); }).find("more than 8"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("5", "n", 0); }).find("more than 0"), std::string::npos);
  // Past UINT64_MAX: must be refused, not wrapped around.
  EXPECT_NE(error_of([] { parse_count("18446744073709551616", "n", kMax); }).find("more than"), std::string::npos);
  EXPECT_NE(error_of([] { parse_count("99999999999999999999999", "n", kMax); }).find("more than"), std::string::npos);
  std::string m = error_of([] { parse_count("x", "--workers"); });
  EXPECT_EQ(m.rfind("--workers: invalid number 'x'", 0), 0u) << m;
}

}  // namespace
}  // namespace gpurun
