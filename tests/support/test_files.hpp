#pragma once

#include <filesystem>
#include <map>
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

// A ConfigMap volume as the kubelet's atomic writer writes it (kubernetes
// pkg/volume/util/atomic_writer.go, v1.30+): `payload` (an item's path -> its text) in a new
// directory `..YYYY_MM_DD_HH_MM_SS.N` (0755; subdirectories made as MkdirAll does, files 0644),
// a symlink `..data_tmp` to it renamed over `..data`, then one relative symlink per distinct first
// path component (`vision -> ..data/vision`: `vision/` is a real directory inside the timestamped
// one, its files regular). Called again on the same volume it is an update: top-level links no
// longer in the payload are removed, and so is the previous timestamped directory.
void write_config_map_volume(const fs::path& volume, const std::map<std::string, std::string>& payload);

}  // namespace gpurun::test
