#include "ctl/profiles/profiles.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/profiles/learn.hpp"
#include "ctl/profiles/profiles_new.hpp"
#include "ctl/profiles/profiles_validate.hpp"
#include "profiles/profile.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

json chain_json(const Profile& profile, const std::vector<fs::path>& dirs) {
  json chain = json::array();
  for (const auto& file : profile.chain)
    chain.push_back({{"name", profile_name_for(file, dirs)}, {"path", file.string()}});
  return chain;
}

json paths_json(const std::vector<fs::path>& paths) {
  json out = json::array();
  for (const auto& p : paths) out.push_back(p.string());
  return out;
}

std::string one_line(std::string text, std::size_t max) {
  for (char& c : text)
    if (c == '\n' || c == '\t') c = ' ';
  if (text.size() > max) text = text.substr(0, max - 3) + "...";
  return text;
}

// JSON as dump(2) lays it out, except that an array of numbers or strings (a shape) keeps one line.
void write_profile_json(std::string& out, const json& value, const std::string& indent) {
  const bool flat =
      value.is_array() && std::none_of(value.begin(), value.end(), [](const json& v) { return v.is_structured(); });
  if (!value.is_structured() || value.empty()) {
    out += value.dump();
    return;
  }
  if (flat) {
    out += "[";
    for (std::size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + value[i].dump();
    out += "]";
    return;
  }
  const std::string inner = indent + "  ";
  out += value.is_object() ? "{\n" : "[\n";
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    out += (first ? "" : ",\n") + inner;
    if (value.is_object()) out += json(it.key()).dump() + ": ";
    write_profile_json(out, *it, inner);
    first = false;
  }
  out += "\n" + indent + (value.is_object() ? "}" : "]");
}

void print_chain_lines(const json& entry, const std::string& indent) {
  const json& chain = entry["chain"];
  for (std::size_t i = 1; i < chain.size(); ++i)
    std::cout << indent << (i == 1 ? "extends: " : "         ") << chain[i]["name"].get<std::string>() << " ("
              << chain[i]["path"].get<std::string>() << ")\n";
  for (const auto& s : entry["shadowed"]) std::cout << indent << "shadows: " << s.get<std::string>() << "\n";
}

}  // namespace

std::string profile_text(const json& profile) {
  std::string out;
  write_profile_json(out, profile, "");
  return out + "\n";
}

std::string profile_name_for(const fs::path& file, const std::vector<fs::path>& dirs) {
  const fs::path f = file.lexically_normal();
  for (const auto& dir : dirs) {
    fs::path rel = f.lexically_relative(dir.lexically_normal());
    if (rel.empty() || rel.begin()->string() == ".." || rel.extension() != ".json") continue;
    std::size_t parts = std::distance(rel.begin(), rel.end());
    if (parts > 2) continue;
    rel.replace_extension();
    return rel.generic_string();
  }
  return file.stem().string();
}

ProfileReach profile_reach(const std::string& name, const fs::path& file, const ProfileStore& host_doors) {
  ProfileReach reach;
  reach.host_file = host_doors.find(name);
  std::error_code ec;
  reach.every_door = reach.host_file && fs::equivalent(*reach.host_file, file, ec);
  if (reach.every_door) reach.host_file.reset();
  return reach;
}

std::string profile_reach_note(const std::string& name, const fs::path& file, const ProfileStore& host_doors) {
  const ProfileReach reach = profile_reach(name, file, host_doors);
  if (reach.every_door) return "";
  const fs::path system = fs::path(kSystemProfileDir) / (name + ".json");
  return "note: only gpu-run and gpu-run-ctl see " + file.string() + "; gpu-run-runtime, gpu-run-hook and the node " +
         "guard run without your HOME and " +
         (reach.host_file ? "find " + reach.host_file->string() + " by that name"
                          : std::string("will not find '") + name + "'") +
         ": for every door run: sudo install -D -m 0644 " + file.string() + " " + system.string();
}

json list_profiles(const ProfileStore& store, const ProfileStore& host_doors) {
  json out;
  json dirs = json::array();
  for (const auto& d : store.dirs()) {
    std::error_code ec;
    dirs.push_back({{"path", d.string()}, {"exists", fs::is_directory(d, ec)}});
  }
  out["search_path"] = dirs;
  json profiles = json::array();
  for (const ProfileEntry& entry : store.list()) {
    json p = {{"name", entry.name}, {"path", entry.path.string()}, {"shadowed", paths_json(entry.shadowed)}};
    const ProfileReach reach = profile_reach(entry.name, entry.path, host_doors);
    p["doors"] = reach.every_door ? "every door" : "gpu-run and gpu-run-ctl only";
    if (reach.host_file) p["host_doors_path"] = reach.host_file->string();
    try {
      Profile profile = store.load(entry.name, false);
      p["description"] = profile.description;
      p["chain"] = chain_json(profile, store.dirs());
    } catch (const Error& e) {
      p["description"] = "";
      p["chain"] = json::array({{{"name", entry.name}, {"path", entry.path.string()}}});
      p["error"] = e.what();
    }
    profiles.push_back(p);
  }
  out["profiles"] = profiles;
  return out;
}

json show_profile(const ProfileStore& store, const std::string& name_or_path) {
  Profile profile = store.load(name_or_path, true);
  json out;
  out["profile"] = profile_to_json(profile);
  out["path"] = profile.chain.empty() ? "" : profile.chain.front().string();
  out["chain"] = chain_json(profile, store.dirs());
  std::vector<fs::path> shadowed;
  for (const auto& entry : store.list())
    if (entry.name == name_or_path) shadowed = entry.shadowed;
  out["shadowed"] = paths_json(shadowed);
  return out;
}

void run_profiles_list(const ProfilesListOptions& o) {
  const Config config = load_ctl_config();
  const json listing = list_profiles(ctl_store(o.profile_dirs, config),
                                     ProfileStore(container_profile_search_path(config.profile_dirs)));
  if (o.json) {
    std::cout << listing.dump(2) << "\n";
    return;
  }
  if (o.names) {
    for (const auto& p : listing["profiles"]) std::cout << p["name"].get<std::string>() << "\n";
    return;
  }
  std::cout << "search path (first hit wins):\n";
  for (const auto& d : listing["search_path"])
    std::cout << "  " << d["path"].get<std::string>() << (d["exists"].get<bool>() ? "" : " (missing)") << "\n";
  std::cout << "\n";
  if (listing["profiles"].empty()) std::cout << "no profiles found\n";
  std::size_t width = 0;
  for (const auto& p : listing["profiles"]) width = std::max(width, p["name"].get<std::string>().size());
  for (const auto& p : listing["profiles"]) {
    const std::string name = p["name"].get<std::string>();
    const std::string description = p["description"].get<std::string>();
    std::cout << name << std::string(width - name.size() + 2, ' ')
              << (description.empty() ? "(no description)" : one_line(description, 76)) << "\n";
    const std::string indent(4, ' ');
    std::cout << indent << "file:    " << p["path"].get<std::string>() << "\n";
    std::cout << indent << "doors:   "
              << (p["doors"] == "every door"
                      ? std::string("every door (gpu-run, gpu-run-ctl, the runtime, the hook, the node guard)")
                      : "gpu-run and gpu-run-ctl only: the runtime, the hook and the node guard " +
                            (p.contains("host_doors_path") ? "use " + p["host_doors_path"].get<std::string>()
                                                           : std::string("do not see it")) +
                            " (put it in " + kSystemProfileDir + ")")
              << "\n";
    print_chain_lines(p, indent);
    if (p.contains("error")) std::cout << indent << "error:   " << p["error"].get<std::string>() << "\n";
  }
}

void run_profiles_show(const ProfilesShowOptions& o) {
  const json shown = show_profile(ctl_store(o.profile_dirs, load_ctl_config()), o.name);
  if (o.json) {
    std::cout << shown.dump(2) << "\n";
    return;
  }
  std::cout << "profile " << shown["profile"]["name"].get<std::string>() << ": " << shown["path"].get<std::string>()
            << "\n";
  print_chain_lines(shown, "");
  std::cout << profile_text(shown["profile"]);
}

void add_profiles_command(CLI::App& app) {
  CLI::App* profiles = app.add_subcommand("profiles", "List, show, validate, create and learn workload profiles");
  profiles->require_subcommand(1);

  auto lo = std::make_shared<ProfilesListOptions>();
  CLI::App* list =
      profiles->add_subcommand("list", "Every profile on the search path: file, extends chain, shadowed files");
  list->add_option("--profile-dir", lo->profile_dirs, "Look for profiles in DIR first (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false);
  list->add_flag("--json", lo->json, "Print the listing as JSON");
  list->add_flag("--names", lo->names, "Print only the names, one a line (for shell completion and scripts)")
      ->excludes("--json");
  list->callback([lo] { run_profiles_list(*lo); });

  auto so = std::make_shared<ProfilesShowOptions>();
  CLI::App* show = profiles->add_subcommand("show", "The merged profile (extends resolved) and the files that made it");
  show->add_option("NAME", so->name, "Profile name, or a path to a .json file")->required();
  show->add_option("--profile-dir", so->profile_dirs, "Look for profiles in DIR first (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false);
  show->add_flag("--json", so->json, "Print as JSON");
  show->callback([so] { run_profiles_show(*so); });

  add_profiles_validate_command(*profiles);
  add_profiles_new_command(*profiles);
  add_profiles_learn_command(*profiles);
}

}  // namespace gpurun
