#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "decision/decision_record.hpp"
#include "oci/oci.hpp"

namespace gpurun {

struct DecisionContext;
struct ShmDecision;

// What gpu-run-runtime needs from its command line: its own `--chain FILE`, first when given
// (a chain file's #! line puts it there), then runc's.
struct RuntimeArgs {
  std::optional<std::string> chain;   // --chain FILE: the runtime to exec is in FILE
  std::size_t own = 0;                // how many leading arguments are gpu-run-runtime's own
  std::string subcommand;             // "create", "run", "start", ... ("" if none)
  std::optional<std::string> bundle;  // --bundle X, --bundle=X, -b X, -b=X (create/run only)
  std::optional<std::string> log;     // runc's global --log FILE
  std::string log_format = "text";    // runc's global --log-format text|json
};

// Writes an error where runc would: to the --log file in its format (containerd-shim
// reads it to tell `docker run` why the create failed). Never throws.
void report_runtime_error(const RuntimeArgs& args, const std::string& message);

// Reads the argv (without argv[0]): `--chain FILE` when first, then runc's global options, the
// subcommand and its options.
RuntimeArgs parse_runtime_args(const std::vector<std::string>& args);

// What the runtime did to a spec for a decision to act.
struct SpecEdit {
  enum Kind { kUnchanged, kSpecSize, kInjectHook } kind = kUnchanged;
  std::string detail;  // " before=..." or " note=..." for the log line
};

// Pure: sizes /dev/shm in a parsed spec for `decision` (which acts): the tmpfs's size= when
// the spec mounts one at /dev/shm, else gpu-run-hook (at `hook_path`, with --config
// `config_file`) injected at createRuntime. A tmpfs already as large is left as it is,
// unless the size was explicit.
SpecEdit edit_spec(nlohmann::json& spec, const SpecFacts& facts, const ShmDecision& decision,
                   const std::string& hook_path, const std::string& config_file);

// Modifier: the decision record (decision_record.hpp) as the spec's annotation kDecisionKey, replacing
// any the spec carried (the container's creator may have written one).
void record_decision(nlohmann::json& spec, const DecisionRecord& record);

// The log's name for an edit: spec-size, inject-hook, unchanged.
const char* edit_name(SpecEdit::Kind kind);

// A bundle as the runtime reads it: its directory, its spec and the spec's facts.
struct Bundle {
  std::filesystem::path dir;  // absolute
  nlohmann::json spec;
  SpecFacts facts;
};

// Load: <bundle>/config.json (bounded, a regular file) and its facts. Throws Error.
Bundle load_bundle(const std::string& bundle);

// Write: the (edited) spec back to <bundle>/config.json atomically.
void write_bundle(const Bundle& bundle);

// On create/run: load_bundle, plan_container, record_decision, edit_spec, write_bundle (or, for
// an engine's own shm bound in, the resize on the host), and one log line naming `runtime`, the
// runtime that is exec'd next. Returns false when nothing was decided to act on (the spec is
// then left unchanged). Throws Error when an explicit
// request cannot be met (or on_error is fail).
bool prepare_bundle(const std::string& bundle, const DecisionContext& context, const std::string& runtime);

// Resolves the real runtime to exec: the first of the config's `runtimes` found (absolute
// path or on PATH), never this binary itself. Throws Error when none is found.
std::string find_real_runtime(const std::vector<std::string>& candidates);

// The runtime a chain file names (runtime_chain.hpp): an executable regular file, never this
// binary itself. Throws Error (exit 1) naming the file and what to do.
std::string chained_runtime(const std::string& chain_file);

// gpu-run-runtime's flow; execs the real runtime (returns only by throwing).
[[noreturn]] void run_runtime(int argc, char** argv);

}  // namespace gpurun
