#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpurun::fuzz {

// The fuzzer's bytes as a string.
inline std::string as_string(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Splits on any of `seps`, keeping empty pieces (an empty argv entry is an input too).
inline std::vector<std::string> split_any(const std::string& text, const char* seps) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    bool sep = false;
    for (const char* s = seps; *s; ++s) sep = sep || c == *s;
    if (c == '\0') sep = true;
    if (sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// A broken invariant: report it and abort so that libFuzzer saves the input.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

#define GPU_RUN_FUZZ_CHECK(cond)              \
  do {                                        \
    if (!(cond)) ::gpurun::fuzz::fail(#cond); \
  } while (0)

}  // namespace gpurun::fuzz
