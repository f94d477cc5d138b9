#pragma once

// The teams' profiles shipped to a cluster (`k8s webhook-manifests --profiles DIR`,
// `k8s guard-manifests --profiles DIR`): a tree of NAME.json and TEAM/NAME.json as one ConfigMap
// whose volume gives the tree back as it was. A ConfigMap key cannot hold '/', so each file is a
// flat key (profile_config_map_key) and the volume's items map it back to its path; the kubelet
// then writes TEAM/ as a directory behind a `TEAM -> ..data/TEAM` link, which the profile store
// reads as it reads the flat layout. docs/kubernetes.md, "Teams' profiles".

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

// A tree of profiles: the path below the directory ("vision/resnet50.json") -> the file's text.
using ProfileTree = std::map<std::string, std::string>;

// The most data one ConfigMap may hold (the API server's limit on an object, 1 MiB).
inline constexpr std::size_t kMaxConfigMapBytes = 1u << 20;

// Reads every profile under `dir` as the search path names them (NAME.json, TEAM/NAME.json),
// each loaded through a store of `dir` and `builtins` (a parent may be a built-in), so a
// profile the cluster could not use is refused here. Throws Error (exit 2) naming --profiles
// and the file: not a directory, a name that is not a profile's, a deeper directory, a
// profile that does not load, none at all.
ProfileTree read_profile_tree(const fs::path& dir, const fs::path& builtins);

// The ConfigMap key of a path of the tree: "vision/resnet50.json" -> "vision__resnet50.json".
std::string profile_config_map_key(const std::string& path);

// The ConfigMap kProfilesConfigMap in `ns`, labelled for `app`: each file of `tree` under
// profile_config_map_key. Throws Error (exit 2) naming --profiles when two paths make one key
// or the data is over kMaxConfigMapBytes. Pure.
nlohmann::ordered_json profiles_config_map(const ProfileTree& tree, const std::string& ns, const std::string& app);

// The pod's volume "profiles": the ConfigMap, optional (a cluster without team profiles); with
// `tree`, the items that put each key back at its path. Pure.
nlohmann::ordered_json profiles_volume(const ProfileTree* tree);

}  // namespace gpurun
