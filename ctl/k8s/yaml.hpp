#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpurun {

// Writes a JSON value as block-style YAML (yaml-cpp's emitter, keys in the value's order) that
// reads back as the same value (YAML 1.1 and 1.2). Every string value is double-quoted, so
// "yes", "0755" or "1e3" stay strings; keys are plain only when they cannot be read as anything
// else; characters outside printable ASCII are escaped.
std::string to_yaml(const nlohmann::ordered_json& value);

}  // namespace gpurun
