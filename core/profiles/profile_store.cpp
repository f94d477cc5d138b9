#include "profiles/profile_store.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/program_path.hpp"

namespace gpurun {
namespace {

constexpr std::size_t kMaxProfileBytes = 1 << 20;
constexpr int kMaxExtendsDepth = 16;

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The JSON schema ships beside the profiles and is not one.
bool is_schema_file(const fs::path& file) {
  const std::string f = file.filename().string();
  return f.size() > 12 && f.compare(f.size() - 12, 12, ".schema.json") == 0;
}

// "a, b, c": the names a "did you mean" offers.
std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

bool looks_like_path(const std::string& s) { return s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0; }

}  // namespace

std::string name_mismatch_message(const fs::path& path, const std::string& name, const std::string& file_name) {
  return path.string() + ": key 'name': '" + name.substr(0, 80) + "' does not match the file's name, which makes it '" +
         file_name + "': rename the file to " + name.substr(0, 80) + ".json (team/name lives in team/) or fix 'name'";
}

std::string unknown_parent_message(const fs::path& path, const std::string& parent,
                                   const std::vector<std::string>& close) {
  std::string message = path.string() + ": key 'extends': unknown parent profile '" + parent + "'";
  if (!close.empty()) message += ": did you mean " + join_names(close) + "?";
  return message;
}

ProfileStore::ProfileStore(std::vector<fs::path> dirs) : dirs_(std::move(dirs)) {}

std::optional<fs::path> ProfileStore::find(const std::string& name, const fs::path& below) const {
  if (!is_valid_profile_name(name) || is_schema_file(name + ".json")) return std::nullopt;
  bool searching = below.empty();
  for (const fs::path& dir : dirs_) {
    fs::path candidate = dir / (name + ".json");
    if (!searching) {
      std::error_code ec;
      searching = fs::equivalent(candidate, below, ec);
      continue;
    }
    // A name that is there but cannot be read (a link loop, no permission on the way) is found:
    // opening it says why, with its errno, instead of "unknown profile".
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return candidate;
  }
  // `below` is not on the path (a profile given as a file): search the whole path.
  if (!searching) return find(name);
  return std::nullopt;
}

Profile ProfileStore::load(const std::string& name_or_path, bool allow_path, const char* known_profiles) const {
  // A file a person names by path is the profile its "name" says (a team's profile copied into a
  // job's repository): the name rule is the search path's, where a name finds its file.
  if (allow_path && looks_like_path(name_or_path)) {
    const fs::path path(name_or_path);
    return load_chain(path, path.stem().string(), {}, /*any_name=*/true);
  }
  if (!is_valid_profile_name(name_or_path)) {
    std::string shown = name_or_path.substr(0, 80);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    throw usage_error("profile '" + shown + "': not a valid profile name (expected [team/]name of a-z 0-9 . _ -" +
                      std::string(allow_path ? ", or a path to a .json file" : "") + ")");
  }
  if (auto it = loaded_.find(name_or_path); it != loaded_.end()) {
    if (it->second.error) throw *it->second.error;
    return *it->second.profile;
  }
  auto path = find(name_or_path);
  if (!path) {
    std::string message = "unknown profile '" + name_or_path + "'";
    if (auto close = suggest(name_or_path); !close.empty()) message += ": did you mean " + join_names(close) + "?";
    std::string hint = kProfilesListHint;
    if (known_profiles) {
      const std::vector<ProfileEntry> entries = list();
      std::string known;
      for (std::size_t i = 0; i < entries.size() && i < kKnownProfilesShown; ++i)
        known += (i ? ", " : "") + entries[i].name;
      if (entries.size() > kKnownProfilesShown)
        known += " and " + std::to_string(entries.size() - kKnownProfilesShown) + " more";
      hint = std::string(known_profiles) + ": " + (known.empty() ? std::string("none") : known);
    }
    // The directories by name: a door that runs without the writer's HOME (the runtime under
    // dockerd) searches fewer than the shell that wrote the profile.
    std::string searched;
    for (const fs::path& dir : dirs_) searched += (searched.empty() ? "" : ", ") + dir.string();
    message += " (" + hint + "; searched " + searched + ")";
    throw usage_error(message);
  }
  return load_chain(*path, name_or_path, {name_or_path});
}

Profile ProfileStore::load_file(const fs::path& path) const {
  return load_chain(path, path.stem().string(),
                    {path.stem().string(), (path.parent_path().filename() / path.stem()).string()});
}

Profile ProfileStore::load_chain(const fs::path& path, const std::string& display,
                                 const std::vector<std::string>& names, bool any_name) const {
  std::vector<nlohmann::json> docs;
  std::vector<fs::path> chain;
  std::vector<std::pair<dev_t, ino_t>> seen;  // files, not names: a symlink cannot hide a cycle
  fs::path current = path;
  for (int depth = 0;; ++depth) {
    if (depth >= kMaxExtendsDepth)
      throw usage_error(path.string() + ": key 'extends': chain deeper than " + std::to_string(kMaxExtendsDepth));
    struct stat st {};
    std::string text = read_small_file(current, kMaxProfileBytes, "profile", &st);
    const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) {
      std::string cycle;
      for (const auto& p : chain) cycle += p.stem().string() + " -> ";
      throw usage_error(chain.back().string() + ": key 'extends': cycle " + cycle + current.stem().string());
    }
    seen.push_back(id);
    docs.push_back(parse_profile_document(text, current.string()));
    chain.push_back(current);
    const nlohmann::json& doc = docs.back();
    // No "extends": the profile extends "default" (its own keys win), so a team's first
    // profile need not repeat every key. "extends": null, and "default" itself, stand alone.
    const bool is_default = current.stem() == kDefaultProfileName;
    if (doc.contains("extends") ? doc["extends"].is_null() : is_default) break;
    const std::string parent = doc.contains("extends") ? doc["extends"].get<std::string>() : kDefaultProfileName;
    // "extends" of the profile's own name means the same profile further down the path.
    const bool self =
        parent == current.stem().string() || (current.parent_path().filename() / current.stem()) == parent;
    auto parent_path = find(parent, self ? current : fs::path());
    // Its own name found nowhere below: the close names would offer the profile itself.
    if (!parent_path)
      throw usage_error(unknown_parent_message(current, parent, self ? std::vector<std::string>{} : suggest(parent)));
    current = *parent_path;
  }
  nlohmann::json merged = nlohmann::json::object();
  for (auto it = docs.rbegin(); it != docs.rend(); ++it) merged = merge_profile_documents(merged, *it);
  merged.erase("extends");
  Profile profile = profile_from_document(merged, path.string());
  profile.name = display;
  if (docs.front().contains("name")) {
    // Doors record the profile's name (GPU_RUN_PROFILE, labels) and look it up again by that
    // name: a "name" other than the file's would name a profile no door can find.
    const std::string name = docs.front()["name"].get<std::string>();
    if (!any_name && std::find(names.begin(), names.end(), name) == names.end())
      throw usage_error(name_mismatch_message(path, name, display));
    profile.name = name;
  }
  profile.chain = chain;
  return profile;
}

std::vector<ProfileEntry> ProfileStore::list() const {
  std::map<std::string, ProfileEntry> found;
  for (const fs::path& dir : dirs_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    auto add = [&](const fs::path& file, const std::string& name) {
      if (file.extension() != ".json" || is_schema_file(file) || !is_valid_profile_name(name)) return;
      auto it = found.find(name);
      if (it == found.end())
        found[name] = {name, file, {}};
      else
        it->second.shadowed.push_back(file);
    };
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::error_code ec2;
      if (entry.is_regular_file(ec2)) {
        add(entry.path(), entry.path().stem().string());
      } else if (entry.is_directory(ec2)) {
        for (const auto& sub : fs::directory_iterator(entry.path(), ec2)) {
          std::error_code ec3;
          if (sub.is_regular_file(ec3))
            add(sub.path(), entry.path().filename().string() + "/" + sub.path().stem().string());
        }
      }
    }
  }
  std::vector<ProfileEntry> out;
  for (auto& [name, entry] : found) out.push_back(std::move(entry));
  return out;
}

void ProfileStore::preload() {
  loaded_.clear();
  std::map<std::string, Loaded> loaded;
  for (const ProfileEntry& entry : list()) {
    try {
      loaded[entry.name].profile = load(entry.name, /*allow_path=*/false);
    } catch (const Error& e) {
      loaded[entry.name].error = e;
    } catch (...) {
      loaded.erase(entry.name);  // not a profile's fault (e.g. bad_alloc): load() meets it again when asked
    }
  }
  loaded_ = std::move(loaded);
}

std::vector<std::string> ProfileStore::suggest(const std::string& name) const {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& entry : list()) {
    std::size_t d = edit_distance(name, entry.name);
    std::string base = entry.name.substr(entry.name.rfind('/') == std::string::npos ? 0 : entry.name.rfind('/') + 1);
    d = std::min(d, edit_distance(name, base));
    if (entry.name.find(name) != std::string::npos || name.find(base) != std::string::npos)
      d = std::min<std::size_t>(d, 1);
    if (d <= std::max<std::size_t>(2, name.size() / 3)) scored.push_back({d, entry.name});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

fs::path builtin_profile_dir(const EnvLookup& env) {
  if (auto v = env("GPU_RUN_BUILTIN_PROFILES"); v && !v->empty()) return *v;
  return program_dir().parent_path() / "share" / "gpu-run" / "profiles";
}

std::vector<fs::path> profile_search_path(const std::vector<fs::path>& cli_dirs,
                                          const std::vector<fs::path>& config_dirs, bool include_user,
                                          const EnvLookup& env) {
  std::vector<fs::path> dirs = cli_dirs;
  if (include_user) {
    if (auto v = env("GPU_RUN_PROFILE_PATH")) {
      std::stringstream ss(*v);
      std::string item;
      while (std::getline(ss, item, ':'))
        if (!item.empty()) dirs.emplace_back(item);
    }
    if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
      dirs.push_back(fs::path(*xdg) / "gpu-run" / "profiles");
    } else if (auto home = env("HOME"); home && !home->empty()) {
      dirs.push_back(fs::path(*home) / ".config" / "gpu-run" / "profiles");
    }
  }
  for (const auto& d : config_dirs) dirs.push_back(d);
  dirs.emplace_back(kSystemProfileDir);
  dirs.push_back(builtin_profile_dir(env));
  return dirs;
}

std::vector<fs::path> container_profile_search_path(const std::vector<fs::path>& config_dirs, const EnvLookup& env) {
  return profile_search_path({}, config_dirs, /*include_user=*/false, env);
}

}  // namespace gpurun
