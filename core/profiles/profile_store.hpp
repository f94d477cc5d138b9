#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "base/error.hpp"
#include "profiles/profile.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// Where load()'s "unknown profile" message sends a person for the known names, unless the door
// asks for the names themselves (a cluster's users have no gpu-run-ctl: the webhook).
inline constexpr const char* kProfilesListHint = "see 'gpu-run-ctl profiles list'";
// The system's profile directory: on every door's search path (the runtime, the hook and the
// node guard run without the HOME of the shell that wrote a profile).
inline constexpr const char* kSystemProfileDir = "/etc/gpu-run/profiles.d";
// How many names load() lists then, at most.
inline constexpr std::size_t kKnownProfilesShown = 20;

// A profile file found on the search path.
struct ProfileEntry {
  std::string name;                // "imagenet", "vision/resnet50"
  fs::path path;                   // the file that wins
  std::vector<fs::path> shadowed;  // same name further down the path
};

// Where profiles are looked up, first hit wins.
class ProfileStore {
 public:
  explicit ProfileStore(std::vector<fs::path> dirs);

  const std::vector<fs::path>& dirs() const { return dirs_; }

  // The file for a profile name, or nullopt. The name must be valid. With `below`, only
  // directories after the one holding `below` are searched (a profile that extends its
  // own name overrides the one further down the path).
  std::optional<fs::path> find(const std::string& name, const fs::path& below = {}) const;

  // Loads and merges a profile by name, or by a path to a .json file when
  // `allow_path` (a person's command line, never a container's input). A file given by path
  // is named by its "name", whatever its file's name (the name rule is the search path's).
  // Throws Error: unknown names list the closest known names, and kProfilesListHint, or with
  // `known_profiles` these words and the names on the path (the first kKnownProfilesShown),
  // then the directories searched.
  Profile load(const std::string& name_or_path, bool allow_path = true, const char* known_profiles = nullptr) const;

  // Loads a profile file (and its parents through the store). A profile's "name", if any,
  // must be the name its file is found under (load: the name asked for): Error (exit 2) if not.
  Profile load_file(const fs::path& path) const;

  // Every profile on the path, sorted by name.
  std::vector<ProfileEntry> list() const;

  // Up to three known names close to `name` (edit distance), best first.
  std::vector<std::string> suggest(const std::string& name) const;

  // Loads every profile list() names now and keeps each Profile (or the Error its load threw),
  // so that load() of those names reads no file afterwards. For a server that reviews many
  // requests (ProfileCache rebuilds it when the directories change). Not thread-safe itself;
  // a preloaded store is only read afterwards.
  void preload();

 private:
  struct Loaded {
    std::optional<Profile> profile;
    std::optional<Error> error;
  };

  // `display` names the profile when its file has no "name"; a "name" it has must be one of
  // `names` (the name it was asked for; for load_file, its stem or team/stem), unless `any_name`.
  Profile load_chain(const fs::path& path, const std::string& display, const std::vector<std::string>& names,
                     bool any_name = false) const;

  std::vector<fs::path> dirs_;
  std::map<std::string, Loaded> loaded_;  // by name, after preload()
};

// The two refusals of a profile's own file that a whole-path check (profiles validate) also
// makes: a "name" other than the name its file has on the search path, and an unknown parent
// (with "did you mean" and the `close` names, when there are any: ProfileStore::suggest).
std::string name_mismatch_message(const fs::path& path, const std::string& name, const std::string& file_name);
std::string unknown_parent_message(const fs::path& path, const std::string& parent,
                                   const std::vector<std::string>& close = {});

// The directory of built-in profiles: $GPU_RUN_BUILTIN_PROFILES if set, else
// <program_dir()>/../share/gpu-run/profiles.
fs::path builtin_profile_dir(const EnvLookup& env = process_env);

// The search path (docs/ARCHITECTURE.md, "Profiles"): cli dirs, GPU_RUN_PROFILE_PATH, the user's XDG dir
// (when `include_user`), the config's profile_dirs, /etc/gpu-run/profiles.d, built-ins.
std::vector<fs::path> profile_search_path(const std::vector<fs::path>& cli_dirs,
                                          const std::vector<fs::path>& config_dirs, bool include_user,
                                          const EnvLookup& env = process_env);

// The search path of the doors a container starts through on a host (gpu-run-runtime,
// gpu-run-hook, the node guard), which run without the HOME of the person who wrote a profile:
// the config's profile_dirs, kSystemProfileDir, the built-ins.
std::vector<fs::path> container_profile_search_path(const std::vector<fs::path>& config_dirs,
                                                    const EnvLookup& env = process_env);

}  // namespace gpurun
