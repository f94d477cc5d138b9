#include "ctl/profiles/profiles_validate.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/json_error.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/profiles/profiles.hpp"
#include "profiles/profile.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxProfileBytes = 1 << 20;

struct Target {
  fs::path file;
  fs::path base;  // the directory the file's name is relative to
};

bool is_schema_file(const fs::path& file) {
  const std::string f = file.filename().string();
  return f.size() > 12 && f.compare(f.size() - 12, 12, ".schema.json") == 0;
}

bool is_profile_file(const fs::directory_entry& entry) {
  std::error_code ec;
  return entry.is_regular_file(ec) && entry.path().extension() == ".json" && !is_schema_file(entry.path());
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The absolute, normalized form of `dir`, without a trailing slash.
fs::path normal_dir(const fs::path& dir) {
  std::error_code ec;
  fs::path n = fs::absolute(dir, ec).lexically_normal();
  if (n.filename().empty() && n.has_parent_path()) n = n.parent_path();
  return n;
}

// A directory's profile files and those one level down (team directories).
void collect(const fs::path& dir, std::vector<Target>& targets) {
  for (const auto& path : sorted_entries(dir)) {
    fs::directory_entry entry(path);
    std::error_code ec;
    if (is_profile_file(entry)) {
      targets.push_back({path, dir});
    } else if (entry.is_directory(ec)) {
      for (const auto& sub : sorted_entries(path))
        if (is_profile_file(fs::directory_entry(sub))) targets.push_back({sub, dir});
    }
  }
}

}  // namespace

std::vector<std::string> profile_document_errors(const std::string& text, const std::string& source) {
  try {
    parse_profile_document(text, source);
    return {};
  } catch (const Error& whole) {
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::exception& e) {
      return {json_parse_error(text, e, source)};
    }
    if (!doc.is_object()) return {whole.what()};
    std::vector<std::string> errors;
    for (const auto& [key, value] : doc.items()) {
      try {
        parse_profile_document(json{{key, value}}.dump(), source);
      } catch (const Error& e) {
        errors.push_back(e.what());
      }
    }
    // A problem between keys (fields together with sample_bytes) shows only on the whole.
    if (errors.empty()) errors.push_back(whole.what());
    return errors;
  }
}

ValidationReport validate_profiles(const std::vector<fs::path>& paths, bool explicit_paths,
                                   const std::vector<fs::path>& search_path) {
  ValidationReport report;
  std::set<std::string> reported;
  auto add_error = [&](const std::string& line) {
    if (reported.insert(line).second) report.errors.push_back(line);
  };

  std::vector<Target> targets;
  std::vector<fs::path> store_dirs;
  std::vector<fs::path> parents;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      collect(p, targets);
      store_dirs.push_back(p);
      // A team directory validated on its own: "team/x" names resolve through its parent.
      const fs::path team = normal_dir(p);
      if (explicit_paths && is_valid_profile_name(team.filename().string())) parents.push_back(team.parent_path());
    } else if (fs::is_regular_file(p, ec)) {
      const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
      targets.push_back({p, dir});
      store_dirs.push_back(dir);
    } else if (explicit_paths) {
      add_error(p.string() + ": no such directory or file (give directories of profiles or .json files)");
    }
  }
  store_dirs.insert(store_dirs.end(), parents.begin(), parents.end());
  store_dirs.insert(store_dirs.end(), search_path.begin(), search_path.end());
  const ProfileStore store(store_dirs);

  for (const Target& t : targets) {
    report.files.push_back(t.file);
    const std::string source = t.file.string();
    const std::string where = profile_name_for(t.file, {t.base});
    const std::size_t errors_before = report.errors.size();
    if (!is_valid_profile_name(where)) {
      add_error(source + ": file name: '" + where +
                "' is not a valid profile name ([team/]name of a-z 0-9 . _ -, starting with a letter or digit), so "
                "no one can ask for it: rename the file");
    }
    std::string text;
    try {
      text = read_small_file(t.file, kMaxProfileBytes, "profile");
    } catch (const Error& e) {
      add_error(e.what());
      continue;
    }
    const std::vector<std::string> doc_errors = profile_document_errors(text, source);
    for (const auto& e : doc_errors) add_error(e);
    // The name and the parent are checked whatever the keys say, so one pass lists every error;
    // the file is named as plan and gpu-run name it (team/name).
    const std::size_t before_chain = report.errors.size();
    const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object()) {
      // A team directory given on its own names its files team/name too (the store's load_file).
      const std::string stem = t.file.stem().string();
      const std::string team_name = (t.file.parent_path().filename() / t.file.stem()).string();
      if (doc.contains("name") && doc["name"].is_string()) {
        const std::string name = doc["name"].get<std::string>();
        if (name != where && name != stem && name != team_name) add_error(name_mismatch_message(t.file, name, where));
      }
      if (doc.contains("extends") && doc["extends"].is_string()) {
        const std::string parent = doc["extends"].get<std::string>();
        // "extends" of its own name is the same profile further down the path.
        const bool self = parent == where || parent == stem || parent == team_name;
        if (!store.find(parent, self ? t.file : fs::path()))
          add_error(unknown_parent_message(t.file, parent, self ? std::vector<std::string>{} : store.suggest(parent)));
      }
    }
    if (!doc_errors.empty() || report.errors.size() != before_chain) continue;

    // The merged chain, as every door's load reads it (a standalone profile missing a key).
    try {
      store.load_file(t.file);
    } catch (const Error& e) {
      add_error(e.what());
    }
    if (report.errors.size() == errors_before) report.valid.push_back(where + " (" + source + ")");
  }
  return report;
}

std::string validation_summary(const ValidationReport& report) {
  const std::string files =
      std::to_string(report.files.size()) + " profile file" + (report.files.size() == 1 ? "" : "s");
  if (report.errors.empty())
    return files + " valid" +
           (report.files.empty() ? " (no *.json profiles found; give the directories that hold them)" : "");
  const std::string errors = std::to_string(report.errors.size()) + " error" + (report.errors.size() == 1 ? "" : "s");
  if (report.files.empty()) return errors + " and no profile file to check (listed above)";
  return errors + " in " + files + " (each listed above as file: key: problem)";
}

void run_profiles_validate(const ProfilesValidateOptions& o) {
  const Config config = load_ctl_config();
  const std::vector<fs::path> search_path = profile_search_path({}, config.profile_dirs, /*include_user=*/true);
  const bool explicit_paths = !o.paths.empty();
  const std::vector<fs::path> paths =
      explicit_paths ? std::vector<fs::path>(o.paths.begin(), o.paths.end()) : search_path;
  const ValidationReport report = validate_profiles(paths, explicit_paths, search_path);
  for (const auto& line : report.valid) std::cout << "ok " << line << "\n";
  std::cout.flush();
  for (const auto& line : report.errors) std::cerr << line << "\n";
  std::cerr.flush();
  const std::string summary = validation_summary(report);
  if (!report.errors.empty()) throw Error(summary, 0, kExitFailure);
  std::cout << summary << "\n";
}

void add_profiles_validate_command(CLI::App& profiles) {
  auto o = std::make_shared<ProfilesValidateOptions>();
  CLI::App* cmd = profiles.add_subcommand(
      "validate", "Check every *.json profile in PATHs (default: the whole search path); exit 1 on any error");
  cmd->add_option("PATH", o->paths, "A directory of profiles (its team subdirectories too) or a .json file; repeatable")
      ->type_name("PATH");
  cmd->footer(
      "Every error is one line on stderr: file: key 'k': problem. Each key is checked on its own,\n"
      "then the name the file is found under, then its merged `extends` chain (parents are looked\n"
      "up in PATHs, then on the search path). For a team's CI: gpu-run-ctl profiles validate profiles/");
  cmd->callback([o] { run_profiles_validate(*o); });
}

}  // namespace gpurun
