#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "profiles/profile.hpp"
#include "profiles/profile_store.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl profiles new NAME --fields ... --batch-size N ...`: a team's first profile,
// written valid (it extends default unless told otherwise, so it needs only what differs).
struct NewProfileOptions {
  std::string name;                       // [team/]name
  std::string fields;                     // "3x224x224:float32,:int64" or "image=3x224x224:float32,..."
  std::optional<std::string> batch_size;  // per GPU rank
  std::optional<std::string> workers;     // per GPU rank, or "auto"
  std::optional<std::string> prefetch_factor;
  std::optional<std::string> pin_memory;      // "true" | "false"
  std::optional<std::string> nccl_transport;  // shm | p2p | none
  std::vector<std::string> loaders;           // --loader NAME[:KEY=VALUE,...], in order
  std::optional<std::string> extends;         // default: "default" (implicit)
  std::optional<std::string> description;
  std::optional<std::string> out_dir;  // default: new_profile_dir
  bool force = false;                  // replace an existing file
  bool print = false;                  // print the document, write nothing
};

// Parses --fields: comma-separated [NAME=]SHAPE:DTYPE, SHAPE as DxDx... or empty for a scalar,
// DTYPE any name PyTorch has (written canonical: float is float32). Unnamed fields are called
// field1, field2, ... Throws Error naming `flag` and the entry.
std::vector<Field> parse_fields_flag(const std::string& text, const std::string& flag = "--fields");

// Parses one --loader: NAME[:KEY=VALUE,...], KEY one of a loader's keys, fields= last (it takes
// the rest, commas and all, as --fields). The loader's object as a profile writes it.
nlohmann::ordered_json parse_loader_flag(const std::string& text);

// The profile document for `options` (core's profile_file_document), checked as the loader
// checks a profile file. Pure.
nlohmann::ordered_json new_profile_document(const NewProfileOptions& options);

// Where `profiles new` writes without --out-dir: root's profiles go to kSystemProfileDir, which
// every door searches; anyone else's to their own directory ($XDG_CONFIG_HOME/gpu-run/profiles),
// which only gpu-run and gpu-run-ctl search. Throws Error (exit 2) when neither XDG_CONFIG_HOME
// nor HOME is set for a user.
fs::path new_profile_dir(bool root, const EnvLookup& env = process_env);

// Writes (or prints) the profile and loads it back through the search path to prove it; says
// in one line (stderr) when the runtime, the hook and the node guard will not see it.
void run_profiles_new(const NewProfileOptions& options);

// Registers `new` on the `profiles` command.
void add_profiles_new_command(CLI::App& profiles);

}  // namespace gpurun
