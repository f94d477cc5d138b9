#include <fstream>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "base/units.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"

namespace gpurun::test {

fs::path TempDir::write(const std::string& rel, const std::string& text) const {
  fs::path p = path() / rel;
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("write " + p.string() + " failed");
  return p;
}

fs::path TempDir::write_script(const std::string& rel, const std::string& body) const {
  const fs::path p = write(rel, "#!/bin/sh\n" + body + "\n");
  fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                         fs::perms::others_exec);
  return p;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::optional<std::string> builtin_only_env(const std::string& name) {
  if (name == "GPU_RUN_BUILTIN_PROFILES") return std::string(GPU_RUN_SOURCE_PROFILES);
  return std::nullopt;
}

HostInfo host_with_cpus(unsigned cpus) {
  HostInfo h;
  h.cpus = cpus;
  h.affinity_cpus = cpus;
  h.mem_total = 64 * kGiB;
  h.mem_available = 32 * kGiB;
  return h;
}

}  // namespace gpurun::test
