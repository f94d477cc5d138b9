#pragma once

#include <cstddef>

namespace gpurun {

// The name of an enumerator numbered 0..N-1, from a table in declaration order; "?" for a
// value outside it.
template <typename E, std::size_t N>
const char* enum_name(E value, const char* const (&names)[N]) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

}  // namespace gpurun
