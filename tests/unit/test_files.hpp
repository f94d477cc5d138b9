#pragma once

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "temp_dir.hpp"

namespace gpurun::test {

namespace fs = std::filesystem;

// core's TempDir, named gpu-run-test.XXXXXX, with a helper to fill it.
class TempDir : public gpurun::TempDir {
 public:
  TempDir() : gpurun::TempDir("gpu-run-test") {}

  // Writes `text` to `rel` (creating parent directories) and returns the full path.
  fs::path write(const std::string& rel, const std::string& text) const {
    fs::path p = path() / rel;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("write " + p.string() + " failed");
    return p;
  }
};

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace gpurun::test
