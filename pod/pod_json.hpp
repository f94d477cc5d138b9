#pragma once

// Reading a Pod as the API server sends it (JSON): a missing or mistyped field reads as absent,
// a container's resource quantities are parsed and named in errors.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gpurun {

// The member `key` of the object `j`; null when `j` is not an object or has no such member.
const nlohmann::json* member(const nlohmann::json& j, const char* key);

// The string member `key` of `j`; "" when absent or not a string.
std::string string_at(const nlohmann::json& j, const char* key);

// The array member `key` of `j`; an empty array when absent or not an array.
const nlohmann::json& array_at(const nlohmann::json& j, const char* key);

// A container's name ("" when it has none).
std::string container_name(const nlohmann::json& container);

// The GPUs a container asks for (nvidia.com/gpu, its limit or else its request); 0 when none.
// Throws Error on a bad quantity.
unsigned container_gpus(const nlohmann::json& container);

// A container's CPUs (its cpu limit or else request, rounded as core's parse_k8s_cpus does);
// `fallback` when it sets neither. Throws Error on a bad quantity.
unsigned container_cpus(const nlohmann::json& container, unsigned fallback);

// A container's memory in bytes in `section` ("limits" or "requests"); nullopt when unset.
// Throws Error on a bad quantity.
std::optional<std::uint64_t> container_memory(const nlohmann::json& container, const char* section);

}  // namespace gpurun
