#pragma once

#include <filesystem>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

// A fresh private directory, $TMPDIR/PREFIX.XXXXXX ($TMPDIR when absolute, else /tmp), that
// removes itself and everything in it. Throws Error naming the pattern when it cannot be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "gpu-run");
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  fs::path path_;
};

}  // namespace gpurun
