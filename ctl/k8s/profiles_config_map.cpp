#include "ctl/k8s/profiles_config_map.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "ctl/k8s/manifest.hpp"
#include "profiles/profile.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr std::size_t kMaxProfileBytes = 1u << 20;

bool is_json(const fs::path& path) { return path.extension() == ".json"; }

}  // namespace

ProfileTree read_profile_tree(const fs::path& dir, const fs::path& builtins) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw usage_error("--profiles " + dir.string() + ": not a directory (give the directory of NAME.json and TEAM/)");
  std::vector<std::string> names;
  auto add = [&](const fs::path& file, const std::string& name) {
    if (!is_valid_profile_name(name))
      throw usage_error("--profiles: " + file.string() + ": '" + name.substr(0, 80) +
                        "' is not a profile name ([team/]name of a-z 0-9 . _ -, starting with a letter or digit)");
    names.push_back(name);
  };
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& path = entry.path();
    if (path.filename().string().front() == '.') continue;  // a ConfigMap volume's ..data, editors' files
    if (entry.is_directory()) {
      for (const auto& sub : fs::directory_iterator(path)) {
        const fs::path& file = sub.path();
        if (file.filename().string().front() == '.') continue;
        if (sub.is_directory())
          throw usage_error("--profiles: " + file.string() +
                            ": a directory below a team's; profiles are NAME.json or TEAM/NAME.json");
        if (sub.is_regular_file() && is_json(file)) add(file, path.filename().string() + "/" + file.stem().string());
      }
    } else if (entry.is_regular_file() && is_json(path)) {
      add(path, path.stem().string());
    }
  }
  if (names.empty())
    throw usage_error("--profiles " + dir.string() + ": no profile in it (NAME.json or TEAM/NAME.json)");
  std::sort(names.begin(), names.end());
  const ProfileStore store({dir, builtins});
  ProfileTree tree;
  for (const std::string& name : names) {
    const fs::path file = dir / (name + ".json");
    try {
      store.load(name, /*allow_path=*/false);
    } catch (const Error& e) {
      throw e.with_context("--profiles").with_exit_code(kExitUsage);
    }
    tree[name + ".json"] = read_small_file(file, kMaxProfileBytes, "--profiles: read the profile");
  }
  return tree;
}

std::string profile_config_map_key(const std::string& path) {
  std::string key = path;
  if (const auto slash = key.find('/'); slash != std::string::npos) key.replace(slash, 1, "__");
  return key;
}

ordered_json profiles_config_map(const ProfileTree& tree, const std::string& ns, const std::string& app) {
  ordered_json data = ordered_json::object();
  std::map<std::string, std::string> path_of_key;
  std::size_t bytes = 0;
  for (const auto& [path, text] : tree) {
    const std::string key = profile_config_map_key(path);
    if (const auto it = path_of_key.find(key); it != path_of_key.end())
      throw usage_error("--profiles: " + it->second + " and " + path + " would both be the ConfigMap key " + key +
                        ": rename one");
    path_of_key[key] = path;
    data[key] = text;
    bytes += key.size() + text.size();
  }
  if (bytes > kMaxConfigMapBytes)
    throw usage_error("--profiles: " + std::to_string(bytes) + " bytes of profiles, more than a ConfigMap holds (" +
                      std::to_string(kMaxConfigMapBytes) + "): ship fewer or smaller profiles");
  ordered_json config_map = manifest_object("v1", "ConfigMap", manifest_metadata(kProfilesConfigMap, ns, app));
  config_map["data"] = data;
  return config_map;
}

ordered_json profiles_volume(const ProfileTree* tree) {
  ordered_json source = {{"name", kProfilesConfigMap}, {"optional", true}};
  if (tree) {
    ordered_json items = ordered_json::array();
    for (const auto& entry : *tree)
      items.push_back({{"key", profile_config_map_key(entry.first)}, {"path", entry.first}});
    source["items"] = items;
  }
  return {{"name", "profiles"}, {"configMap", source}};
}

}  // namespace gpurun
