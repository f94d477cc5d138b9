#include "base/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/error.hpp"

namespace gpurun {
namespace {

using u128 = unsigned __int128;
constexpr u128 kMax = std::numeric_limits<std::uint64_t>::max();

Error size_error(std::string_view what, std::string_view text, const std::string& why) {
  return usage_error(std::string(what) + ": invalid size '" + std::string(text) + "': " + why +
                     " (expected a number with an optional unit b, k, m, g, t or Ki, Mi, Gi, Ti, e.g. 512m or 1.5g)");
}

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 64)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isprint(u)) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  if (text.size() > 64) out += "...";
  return out;
}

}  // namespace

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  const std::string shown = printable(text);
  std::size_t i = 0;
  if (text.empty()) throw size_error(what, shown, "empty");
  if (text[0] == '-') throw size_error(what, shown, "negative");
  if (text[0] == '+') throw size_error(what, shown, "sign not allowed");
  u128 whole = 0;
  std::size_t digits = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > kMax) throw size_error(what, shown, "too large");
    ++i;
    ++digits;
  }
  u128 frac_num = 0, frac_den = 1;
  bool frac_nonzero = false;  // digits past the 18th are dropped but still make the value non-zero
  if (i < text.size() && text[i] == '.') {
    ++i;
    std::size_t frac_digits = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (text[i] != '0') frac_nonzero = true;
      if (frac_digits < 18) {
        frac_num = frac_num * 10 + static_cast<unsigned>(text[i] - '0');
        frac_den *= 10;
      }
      ++i;
      ++frac_digits;
    }
    if (frac_digits == 0) throw size_error(what, shown, "no digits after '.'");
  }
  if (digits == 0) throw size_error(what, shown, "no number");
  if (i < text.size() && text[i] == ' ') ++i;
  u128 mult = 1;
  if (i < text.size()) {
    switch (std::tolower(static_cast<unsigned char>(text[i]))) {
      case 'b':
        mult = 1;
        break;
      case 'k':
        mult = kKiB;
        break;
      case 'm':
        mult = kMiB;
        break;
      case 'g':
        mult = kGiB;
        break;
      case 't':
        mult = kTiB;
        break;
      case 'p':
        mult = kTiB * 1024;
        break;
      default:
        throw size_error(what, shown, "unknown unit");
    }
    bool is_byte = std::tolower(static_cast<unsigned char>(text[i])) == 'b';
    ++i;
    if (!is_byte) {
      if (i < text.size() && std::tolower(static_cast<unsigned char>(text[i])) == 'i') ++i;
      if (i < text.size() && std::tolower(static_cast<unsigned char>(text[i])) == 'b') ++i;
    }
  }
  if (i != text.size()) throw size_error(what, shown, "trailing characters");
  u128 bytes = whole * mult;
  if (whole != 0 && bytes / whole != mult) throw size_error(what, shown, "too large");
  bytes += frac_num * mult / frac_den;
  if (bytes > kMax) throw size_error(what, shown, "too large");
  if (bytes == 0 && (whole != 0 || frac_nonzero)) {
    throw size_error(what, shown, "rounds to 0 bytes");
  }
  return static_cast<std::uint64_t>(bytes);
}

std::string format_mib(std::uint64_t bytes) {
  if (bytes < kMiB) return format_size(bytes);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / static_cast<double>(kMiB));
  std::string out = buf;
  if (out.size() > 2 && out.compare(out.size() - 2, 2, ".0") == 0) out.resize(out.size() - 2);
  return out + "MiB";
}

std::string format_size(std::uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < kKiB) return std::to_string(bytes) + "B";
  int unit = 0;
  long double value = static_cast<long double>(bytes);
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  // 1023.96KiB would print as "1024.0KiB": show it in the next unit instead.
  if (unit < 6 && std::round(value * 10) >= 1024 * 10) {
    value /= 1024;
    ++unit;
  }
  // One decimal, none when it is 0: a sum shows as its terms do ("147MiB = image 147MiB +
  // label 4KiB", not "147.0MiB").
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1Lf", value);
  std::string out = buf;
  if (out.size() > 2 && out.compare(out.size() - 2, 2, ".0") == 0) out.resize(out.size() - 2);
  return out + kUnits[unit];
}

std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::string exact_size(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  for (const auto& [unit, suffix] :
       {std::pair{kTiB, "t"}, std::pair{kGiB, "g"}, std::pair{kMiB, "m"}, std::pair{kKiB, "k"}})
    if (bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  return std::to_string(bytes) + "b";
}

std::string engine_size(std::uint64_t bytes) {
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "m";
  return std::to_string(bytes) + "b";
}

std::string log_size(std::uint64_t bytes) {
  if (bytes % kMiB == 0) return engine_size(bytes);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1Lf", static_cast<long double>(bytes) / kMiB);
  std::string out = buf;
  if (out.size() > 2 && out.compare(out.size() - 2, 2, ".0") == 0) out.resize(out.size() - 2);
  return out + "m";
}

std::uint64_t round_up(std::uint64_t value, std::uint64_t align) {
  if (align == 0) return value;
  u128 r = (static_cast<u128>(value) + align - 1) / align * align;
  return r > kMax ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(r);
}

std::uint64_t parse_count(std::string_view text, std::string_view what, std::uint64_t max) {
  const std::string shown = printable(text);
  auto fail = [&](const std::string& why) {
    return usage_error(std::string(what) + ": invalid number '" + shown + "': " + why);
  };
  if (text.empty()) throw fail("empty");
  if (text[0] == '-') throw fail("negative");
  std::uint64_t value = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) throw fail("expected a whole number");
    const unsigned digit = static_cast<unsigned>(c - '0');
    // Checked before multiplying so that a `max` near UINT64_MAX cannot wrap.
    if (digit > max || value > (max - digit) / 10) throw fail("more than " + std::to_string(max));
    value = value * 10 + digit;
  }
  return value;
}

std::string counted(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace gpurun
