#pragma once

#include <filesystem>
#include <string>

#include "base/temp_dir.hpp"

namespace gpurun::test {

namespace fs = std::filesystem;

// core's TempDir, named gpu-run-test.XXXXXX, with a helper to fill it.
class TempDir : public gpurun::TempDir {
 public:
  TempDir() : gpurun::TempDir("gpu-run-test") {}

  // Writes `text` to `rel` (creating parent directories) and returns the full path.
  fs::path write(const std::string& rel, const std::string& text) const;

  // Writes an executable shell script of `body` to `rel` and returns its path: a stand-in for a
  // helper the code under test runs (gpu-run-hook --remount, a runtime).
  fs::path write_script(const std::string& rel, const std::string& body) const;
};

// A whole file's bytes ("" when it cannot be read).
std::string read_text(const fs::path& path);

}  // namespace gpurun::test
