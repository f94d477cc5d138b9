#include "base/env.hpp"

#include <cstdlib>

namespace gpurun {

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

}  // namespace gpurun
