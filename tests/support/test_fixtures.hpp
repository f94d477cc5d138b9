#pragma once

#include <map>
#include <optional>
#include <string>

#include "base/env.hpp"
#include "oci/host.hpp"

namespace gpurun::test {

// An environment of exactly `vars`.
EnvLookup fake_env(std::map<std::string, std::string> vars);

// An environment with nothing but the source tree's built-in profiles, so that no user or
// host profile changes a test.
std::optional<std::string> builtin_only_env(const std::string& name);

// A host with `cpus` CPUs, 64GiB of memory and 32GiB available.
HostInfo host_with_cpus(unsigned cpus);

}  // namespace gpurun::test
