#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <set>
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

void write_config_map_volume(const fs::path& volume, const std::map<std::string, std::string>& payload) {
  static unsigned serial = 2941650788u;  // os.MkdirTemp's suffix: a decimal uint32
  fs::create_directories(volume);
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "..%Y_%m_%d_%H_%M_%S.", &utc);
  const std::string ts = stamp + std::to_string(serial++);
  std::error_code ec;
  const fs::path old_ts = fs::read_symlink(volume / "..data", ec);  // empty on the first write
  // newTimestampDir: MkdirTemp, then chmod 0755.
  fs::create_directory(volume / ts);
  ::chmod((volume / ts).c_str(), 0755);
  // writePayloadToDir: MkdirAll(dir, ModePerm) for each file's directory, WriteFile, chmod 0644.
  for (const auto& [path, text] : payload) {
    const fs::path full = volume / ts / path;
    fs::create_directories(full.parent_path());
    std::ofstream(full, std::ios::binary) << text;
    ::chmod(full.c_str(), 0644);
  }
  // Symlink(ts, "..data_tmp"), then the atomic Rename over "..data".
  fs::create_symlink(ts, volume / "..data_tmp");
  if (std::rename((volume / "..data_tmp").c_str(), (volume / "..data").c_str()) != 0)
    throw std::runtime_error("rename ..data_tmp over ..data in " + volume.string());
  // createUserVisibleFiles: one link per first path component, made when it does not exist.
  std::set<std::string> top;
  for (const auto& entry : payload) top.insert(entry.first.substr(0, entry.first.find('/')));
  for (const std::string& name : top)
    if (!fs::is_symlink(volume / name)) fs::create_symlink(fs::path("..data") / name, volume / name);
  // removeUserVisiblePaths of the old payload's top level, then RemoveAll(old ts).
  for (const auto& entry : fs::directory_iterator(volume)) {
    const std::string name = entry.path().filename().string();
    if (name.front() != '.' && !top.count(name)) fs::remove(entry.path());
  }
  if (!old_ts.empty()) fs::remove_all(volume / old_ts);
}

}  // namespace gpurun::test
