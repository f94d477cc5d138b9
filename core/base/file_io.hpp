#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

// Reads a whole small file, refusing directories, non-regular files and files over
// `max_bytes`. Throws Error naming the path. `opened`, if given, receives the fstat of the
// file that was read (its identity, for cycle checks).
std::string read_small_file(const fs::path& path, std::size_t max_bytes, const std::string& what,
                            struct stat* opened = nullptr);

// Reads the regular file `relative` below the directory `root`, one component at a time with
// O_NOFOLLOW (no symlink on the way leads out of `root`; no ".", "..", or absolute path), at most
// `max_bytes`. nullopt when a component is missing, a symlink or not a directory, or the file is
// not a regular file or is larger.
std::optional<std::string> read_below(const fs::path& root, const fs::path& relative, std::size_t max_bytes);

}  // namespace gpurun
