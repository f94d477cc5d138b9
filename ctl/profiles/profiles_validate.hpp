#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gpurun {

namespace fs = std::filesystem;

// `gpu-run-ctl profiles validate [PATH...]`: checks every profile file, for a team's CI.
struct ProfilesValidateOptions {
  std::vector<std::string> paths;  // directories or .json files; empty: the search path
};

struct ValidationReport {
  std::vector<fs::path> files;      // every profile file checked, in order
  std::vector<std::string> errors;  // one line each: "file: key 'k': problem"
  std::vector<std::string> valid;   // "name (file)" of each file without error
};

// Every problem of one profile document, each key checked on its own so that one bad key
// does not hide the next. Empty when the document is valid on its own (extends unresolved).
std::vector<std::string> profile_document_errors(const std::string& text, const std::string& source);

// Validates the *.json profiles in `paths` (a directory's files and those of its team
// subdirectories; schema files skipped), including the name each file is found under and its
// merged `extends` chain, resolved through `paths` then `search_path`. A missing path is an
// error only when `explicit_paths`. Never throws for bad profiles: they become errors.
ValidationReport validate_profiles(const std::vector<fs::path>& paths, bool explicit_paths,
                                   const std::vector<fs::path>& search_path);

// The report's last line: "8 profile files valid", "2 errors in 3 profile files (...)", or,
// when nothing could be checked, "1 error and no profile file to check (...)".
std::string validation_summary(const ValidationReport& report);

// Prints the report: errors on stderr, valid files and the summary on stdout. Throws Error
// with exit status 1 when any error was found.
void run_profiles_validate(const ProfilesValidateOptions& options);

// Registers `validate` on the `profiles` command.
void add_profiles_validate_command(CLI::App& profiles);

}  // namespace gpurun
