#pragma once

#include <filesystem>

namespace gpurun {

// The running program's file, from /proc/self/exe. Throws Error with its errno when that link
// cannot be read (no /proc).
std::filesystem::path program_path();

// The directory of the running program: program_path()'s parent.
std::filesystem::path program_dir();

// gpu-run-hook, which applies a size and remounts /dev/shm: `configured` (the config's hook_path)
// when given, else the one beside the running program (they are installed together).
std::filesystem::path hook_program_path(const std::filesystem::path& configured);

}  // namespace gpurun
