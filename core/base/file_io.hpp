#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <filesystem>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

// Reads a whole small file, refusing directories, non-regular files and files over
// `max_bytes`. Throws Error naming the path. `opened`, if given, receives the fstat of the
// file that was read (its identity, for cycle checks).
std::string read_small_file(const fs::path& path, std::size_t max_bytes, const std::string& what,
                            struct stat* opened = nullptr);

}  // namespace gpurun
