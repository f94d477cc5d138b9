#pragma once

#include <functional>
#include <optional>
#include <string>

namespace gpurun {

// How code reads environment variables, so that tests can pass their own environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment, as an EnvLookup.
std::optional<std::string> process_env(const std::string& name);

}  // namespace gpurun
