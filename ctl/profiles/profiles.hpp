#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiles/profile_store.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl profiles list`: every profile on the search path.
struct ProfilesListOptions {
  std::vector<std::string> profile_dirs;
  bool json = false;
  bool names = false;  // one name per line, for shell completion and scripts
};

// `gpu-run-ctl profiles show NAME`: one merged profile and the files that made it.
struct ProfilesShowOptions {
  std::string name;  // a name, or a path to a .json file
  std::vector<std::string> profile_dirs;
  bool json = false;
};

// The name a profile file has on the search path ("vision/resnet50" for
// <dir>/vision/resnet50.json), or the file's stem when it is in none of `dirs`.
std::string profile_name_for(const fs::path& file, const std::vector<fs::path>& dirs);

// Which of this host's doors find profile `name` where a person's commands find it (`file`):
// every door when `host_doors` (container_profile_search_path: the runtime, the hook, the node
// guard) finds the same file by that name; else gpu-run and gpu-run-ctl only.
struct ProfileReach {
  bool every_door = false;
  std::optional<fs::path> host_file;  // what the runtime, hook and guard find by that name instead
};
ProfileReach profile_reach(const std::string& name, const fs::path& file, const ProfileStore& host_doors);

// One line for a profile the runtime, hook and guard will not see: which doors, why, and the
// command that puts it in kSystemProfileDir; "" when every door sees it.
std::string profile_reach_note(const std::string& name, const fs::path& file, const ProfileStore& host_doors);

// The listing of `profiles list --json`: {"search_path": [...], "profiles": [{name, description,
// path, shadowed, chain: [{name, path}], doors, error?}]}, `doors` "every door" or "gpu-run and
// gpu-run-ctl only" (profile_reach against `host_doors`). A profile that fails to load is listed
// with its error rather than failing the listing.
nlohmann::json list_profiles(const ProfileStore& store, const ProfileStore& host_doors);

// The document of `profiles show --json`: {"profile": <merged>, "path", "chain": [{name, path}],
// "shadowed": [...]}. Throws Error for unknown or invalid profiles.
nlohmann::json show_profile(const ProfileStore& store, const std::string& name_or_path);

// A merged profile as `profiles show` prints it: indented JSON with each shape on one line
// ("shape": [3, 224, 224]), ending in a newline.
std::string profile_text(const nlohmann::json& profile);

void run_profiles_list(const ProfilesListOptions& options);
void run_profiles_show(const ProfilesShowOptions& options);

// Registers `profiles` with list, show and validate on `app`.
void add_profiles_command(CLI::App& app);

}  // namespace gpurun
