#include "base/k8s_quantity.hpp"

#include <cmath>
#include <regex>
#include <utility>

#include "base/error.hpp"

namespace gpurun {

std::string k8s_shown(const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; }

std::uint64_t parse_k8s_quantity(const std::string& text, const std::string& flag) {
  static const std::regex pattern("([0-9]+)(\\.([0-9]+))?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?");
  const std::string expected =
      flag + " '" + k8s_shown(text) + "': expected a Kubernetes memory quantity such as 16Gi (binary) or 16G (decimal)";
  std::smatch m;
  if (text.size() > 64 || !std::regex_match(text, m, pattern)) {
    static const std::regex docker_like("[0-9.]+([gGmMkKtT][bB]?|[mgkt])");
    if (text.size() <= 64 && std::regex_match(text, docker_like))
      throw usage_error(expected + "; Docker's 16g is written 16Gi here (and a lowercase m means milli)");
    throw usage_error(expected);
  }
  static const std::pair<const char*, std::uint64_t> units[] = {
      {"Ki", 1ull << 10},      {"Mi", 1ull << 20},         {"Gi", 1ull << 30},
      {"Ti", 1ull << 40},      {"Pi", 1ull << 50},         {"Ei", 1ull << 60},
      {"k", 1000ull},          {"M", 1000000ull},          {"G", 1000000000ull},
      {"T", 1000000000000ull}, {"P", 1000000000000000ull}, {"E", 1000000000000000000ull}};
  std::uint64_t unit = 1;
  for (const auto& [suffix, bytes] : units)
    if (m[4] == suffix) unit = bytes;
  const std::string whole = m[1].str();
  constexpr std::uint64_t kMaxQuantity = 1ull << 62;
  if (whole.size() > 19) throw usage_error(flag + " '" + k8s_shown(text) + "': too large");
  const std::uint64_t integer = std::stoull(whole);
  if (integer > kMaxQuantity / unit) throw usage_error(flag + " '" + k8s_shown(text) + "': too large");
  std::uint64_t bytes = integer * unit;
  if (m[3].matched) {
    const long double fraction = std::stold("0." + m[3].str());
    bytes += static_cast<std::uint64_t>(std::ceil(fraction * static_cast<long double>(unit)));
  }
  if (bytes == 0) throw usage_error(flag + " '" + k8s_shown(text) + "': must be more than 0 bytes");
  return bytes;
}

std::string k8s_quantity(std::uint64_t bytes) {
  static const std::pair<const char*, std::uint64_t> units[] = {{"Ei", 1ull << 60}, {"Pi", 1ull << 50},
                                                                {"Ti", 1ull << 40}, {"Gi", 1ull << 30},
                                                                {"Mi", 1ull << 20}, {"Ki", 1ull << 10}};
  if (bytes == 0) return "0";
  for (const auto& [suffix, unit] : units)
    if (bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  return std::to_string(bytes);
}

unsigned parse_k8s_cpus(const std::string& text, const std::string& what) {
  static const std::regex pattern("([0-9]{1,7})(\\.([0-9]{1,3}))?|([0-9]{1,10})m");
  std::smatch m;
  if (text.size() > 16 || !std::regex_match(text, m, pattern))
    throw usage_error(what + " '" + k8s_shown(text) + "': expected a Kubernetes CPU quantity such as 4, 1.5 or 500m");
  const std::uint64_t cpus = m[4].matched ? std::stoull(m[4].str()) / 1000 : std::stoull(m[1].str());
  return static_cast<unsigned>(std::min<std::uint64_t>(std::max<std::uint64_t>(cpus, 1), 1u << 16));
}

bool is_k8s_dns_label(const std::string& name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  for (const char ch : name)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
  return true;
}

}  // namespace gpurun
