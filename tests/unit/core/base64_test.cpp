#include "base/base64.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace gpurun {
namespace {

// The hand-written encoder base64_encode replaced, as the oracle of its answers.
std::string reference_base64(const std::string& data) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) | (static_cast<unsigned char>(data[i + 1]) << 8) |
                       static_cast<unsigned char>(data[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i < data.size()) {
    unsigned v = static_cast<unsigned char>(data[i]) << 16;
    if (i + 1 < data.size()) v |= static_cast<unsigned char>(data[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < data.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// `size` bytes of every value, in a fixed order (a linear congruential sequence).
std::string bytes(std::size_t size) {
  std::string out(size, '\0');
  std::uint32_t x = 12345;
  for (char& c : out) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

TEST(Base64Test, Rfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, PaddingOfZeroToThreeBytesOfAnyValue) {
  EXPECT_EQ(base64_encode(std::string()), "");
  EXPECT_EQ(base64_encode(std::string(1, '\0')), "AA==");
  EXPECT_EQ(base64_encode(std::string(2, '\0')), "AAA=");
  EXPECT_EQ(base64_encode(std::string(3, '\0')), "AAAA");
  EXPECT_EQ(base64_encode("\xff"), "/w==");
  EXPECT_EQ(base64_encode("\xff\xff"), "//8=");
  EXPECT_EQ(base64_encode("\xff\xff\xff"), "////");
  EXPECT_EQ(base64_encode("\xfb\xef"), "++8=");
  EXPECT_EQ(base64_encode(std::string("a\0b", 3)), "YQBi");  // an embedded NUL is a byte like any other
}

TEST(Base64Test, SameAnswersAsTheHandWrittenEncoder) {
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(base64_encode(one), reference_base64(one)) << "byte " << b;
  }
  for (std::size_t n = 0; n <= 64; ++n) EXPECT_EQ(base64_encode(bytes(n)), reference_base64(bytes(n))) << n << " bytes";
  // Longer than one EVP_EncodeBlock call's 3 MiB, ending in a partial group: no padding inside,
  // none missing at the end, no line breaks.
  const std::string large = bytes((3 << 20) + 3 + 2);
  const std::string encoded = base64_encode(large);
  EXPECT_EQ(encoded.size(), (large.size() + 2) / 3 * 4);
  EXPECT_EQ(encoded.find_first_of("=\n"), encoded.size() - 1);
  EXPECT_TRUE(encoded == reference_base64(large));  // EXPECT_EQ would print megabytes on a failure
}

}  // namespace
}  // namespace gpurun
