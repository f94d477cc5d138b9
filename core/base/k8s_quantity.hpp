#pragma once

// Kubernetes quantities, the one place they are read and written: gpu-run-ctl k8s prints
// them, gpu-run-webhook reads a pod's limits and writes the raised ones.

#include <cstdint>
#include <string>

namespace gpurun {

// Parses a Kubernetes memory quantity ("16Gi", "1.5G", "512Mi", "1000000") to bytes, rounding
// fractions up. Throws Error (exit 2) naming `flag` on anything else, with a hint for Docker's
// "16g".
std::uint64_t parse_k8s_quantity(const std::string& text, const std::string& flag);

// Bytes as a Kubernetes quantity in the largest binary unit that is exact: "2Gi", "1556Mi", "4097".
std::string k8s_quantity(std::uint64_t bytes);

// Parses a Kubernetes CPU quantity ("4", "1.5", "500m") to whole CPUs, rounded down, at least 1.
// Throws Error (exit 2) naming `what` on anything else.
unsigned parse_k8s_cpus(const std::string& text, const std::string& what);

// True for an RFC 1123 label, as Kubernetes requires of a namespace's or a container's name:
// lowercase letters, digits and '-', at most 63, starting and ending alphanumeric.
bool is_k8s_dns_label(const std::string& name);

// A value as a message shows it: at most 40 characters, then "...".
std::string k8s_shown(const std::string& s);

}  // namespace gpurun
