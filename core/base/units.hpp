#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpurun {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;
constexpr std::uint64_t kTiB = 1024 * kGiB;

// Parses a size as Docker does ("64m", "1.5g", "512", "2G"), 1024-based and
// case-insensitive, plus the IEC forms "Ki Mi Gi Ti" (optionally followed by "B").
// Throws Error naming `what` on negatives, overflow, a non-zero value that rounds
// to 0 bytes, empty input or trailing junk.
std::uint64_t parse_size(std::string_view text, std::string_view what = "size");

// "1.5GiB", "64MiB", "512B": for people, to one decimal (none when it rounds to a whole number).
std::string format_size(std::uint64_t bytes);

// A count and its noun, singular or plural: counted(1, "rank") is "1 rank", counted(2, "rank")
// "2 ranks".
std::string counted(long long n, const std::string& noun);

// A size in MiB to one decimal ("20643.9MiB"; below 1 MiB as format_size): the unit of a plan's
// breakdown, so that its terms, the need and the size applied add up by eye.
std::string format_mib(std::uint64_t bytes);

// The exact value for an engine's --shm-size: "<n>m" when a whole number of MiB,
// else "<n>b".
std::string engine_size(std::uint64_t bytes);

// A size in a log line, always in MiB: "64m" when a whole number of MiB (as engine_size), else
// to one decimal, "62.5m" (podman's default of 65536000 bytes).
std::string log_size(std::uint64_t bytes);

// A size as a profile file writes it, exactly and in the largest unit that divides it:
// "256g", "1536m", "4k", "1000b" (parse_size reads it back to the same bytes).
std::string exact_size(std::uint64_t bytes);

// Rounds up to a multiple of `align` (a power of two); saturates at UINT64_MAX.
std::uint64_t round_up(std::uint64_t value, std::uint64_t align);

// a x b and a + b, saturating at UINT64_MAX (the sizing model's arithmetic on profile values).
std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b);
std::uint64_t sat_add(std::uint64_t a, std::uint64_t b);

// Parses a non-negative decimal integer that fits in `max`; throws Error naming `what`.
std::uint64_t parse_count(std::string_view text, std::string_view what, std::uint64_t max = 1u << 20);

}  // namespace gpurun
