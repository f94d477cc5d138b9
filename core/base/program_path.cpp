#include "base/program_path.hpp"

#include <system_error>

#include "base/error.hpp"

namespace gpurun {

std::filesystem::path program_path() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw system_error("read /proc/self/exe to find the running program", ec.value());
  return exe;
}

std::filesystem::path program_dir() { return program_path().parent_path(); }

std::filesystem::path hook_program_path(const std::filesystem::path& configured) {
  return configured.empty() ? program_dir() / "gpu-run-hook" : configured;
}

}  // namespace gpurun
