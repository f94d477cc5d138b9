#pragma once

// The decision record: what a door decided for one container's /dev/shm, written once as one
// key of the container contract (kDecisionKey: the wrapper's label, the runtime's spec
// annotation, the webhook's and `gpu-run-ctl k8s`'s pod annotation, the hook's state file under
// kDecisionDir) and read back through read_recorded() by the guard, doctor and watch.
// docs/ARCHITECTURE.md, "The decision record", says what a reader may trust it for: a
// container writes its own labels and annotations, so a record only ever narrows what the
// reader's own limits allow (guard_limits_of_record).

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "decision/contract.hpp"
#include "decision/growth_limits.hpp"
#include "decision/shm_decision.hpp"
#include "oci/container.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// The version this build writes; a record of another version is not read (the old keys are).
inline constexpr int kDecisionVersion = 1;
// The most bytes of a record read (a label or an annotation is at most kMaxAnnotationBytes).
inline constexpr std::size_t kMaxDecisionBytes = 4096;

struct DecisionRecord {
  int version = kDecisionVersion;
  std::string door;                   // who decided: gpu-run, gpu-run-runtime, gpu-run-hook, ...
  std::optional<std::uint64_t> size;  // what it applied; none: it applied none (the host's /dev/shm)
  std::uint64_t need = 0;             // the plan's need (ShmPlan::need); 0: no plan
  std::uint64_t ceiling = 0;          // the most the guard may grow it to (max_shm, budget, an
                                      // emptyDir's sizeLimit); 0: none known to the door
  std::uint64_t headroom = 0;         // the next allocations (guard_headroom); 0: unknown
  std::uint64_t batch_bytes = 0;      // its largest batch; 0: unknown
  // The request it planned.
  std::string profile;
  unsigned gpus = 0;
  std::uint64_t workers = 0;
  std::uint64_t batch_size = 0;
  std::string reason;  // how the size was found, in the decision's words
  // The workers the container's command line gives, when the door saw one ("-j 8", 8): doctor
  // names a crash of a plan for other workers by it.
  std::string command_flag;
  std::uint64_t command_workers = 0;
};

// The record of a decision a door acted on: its size (none when `applied` is false), the
// plan's need, headroom and largest batch, and the ceiling of guard_limits(plan) (the profile's
// max_shm and the memory budget), or `ceiling` when given (an emptyDir's sizeLimit). Pure.
DecisionRecord decision_record(const ShmDecision& decision, const std::string& door, bool applied = true,
                               std::optional<std::uint64_t> ceiling = std::nullopt);

// The record as the contract's one value: compact JSON, keys in a fixed order.
std::string decision_text(const DecisionRecord& record);

// Parses a record: bounded (kMaxDecisionBytes), every field of its type and range, the version
// this build writes. Throws Error saying what is wrong (`where`: "label gpu-run.decision").
DecisionRecord parse_decision(const std::string& text, const std::string& where);

// The hook's record of container `id`: <dir>/<id>.json (dir: kDecisionDir). Throws Error for
// an id that is not a container id (one path component of [A-Za-z0-9_.-], not "." or "..").
fs::path decision_state_path(const fs::path& dir, const std::string& id);

// Writes the hook's record of container `id` under `dir` (created 0700 if missing, and its
// parent 0755 if missing too: /run/gpu-run after a boot), atomically.
void write_decision_state(const fs::path& dir, const std::string& id, const DecisionRecord& record);

// Removes the hook's record of container `id`, if any (the guard, when the container exits).
void remove_decision_state(const fs::path& dir, const std::string& id);

// Where a container may carry what a door recorded.
struct RecordPlaces {
  const std::map<std::string, std::string>* labels = nullptr;       // the engine's (the wrapper's)
  const std::map<std::string, std::string>* annotations = nullptr;  // its OCI spec's (runtime, CRI)
  const std::map<std::string, std::string>* env = nullptr;          // the old GPU_RUN_* keys
  std::string id;                                                   // the container's id: the hook's state file
  fs::path state_dir;  // where the hook writes (kDecisionDir); empty: not looked at
};

// What a door recorded in a container, as the one reader (the guard, doctor, watch) sees it.
struct Recorded {
  std::optional<DecisionRecord> record;  // the record, when one was found and could be read
  std::string where;                     // where it was found: "hook state file", "annotation", "label"
  std::string error;                     // a record found but not read: why (then `legacy` is read)
  ContainerRequest legacy;               // without a record: the old keys (recorded_request)
  bool legacy_size = false;              // without a record: a GPU_RUN_SHM_SIZE or gpu-run.shm-size

  // gpu-run sized it: a record (even one that cannot be read), or the old keys of one.
  bool sized() const { return record || !error.empty() || legacy.profile || legacy_size; }
};

// Reads a container's record: the hook's state file, else the spec's annotation, else the
// label (the door nearest the container wins; each one a door writes once); without one, the
// old keys, read as before the record existed. Never throws.
Recorded read_recorded(const RecordPlaces& places);

// read_recorded of a container as ctl's commands see it: its labels, its spec's annotations
// (which also stand for labels in the old keys: a pod's gpu-run.profile), its environment, and
// the hook's state file under `state_dir` (empty: not looked at).
Recorded read_recorded(const ContainerInfo& container, const fs::path& state_dir = kDecisionDir);

// The growth limits the guard gives a container from its record, never beyond its own:
// `own` holds what the guard knows without the record (the memory budget of the container's
// real limit, the size limit of an emptyDir, the max_shm of the profile the host's store
// knows by that name). The record's ceiling can only lower the growth cap; its headroom (and
// so its need and batch) is held within the cap, or within `host_memory` when there is none:
// a forged record makes the guard grow no further than it would without it. Pure.
GuardLimits guard_limits_of_record(const DecisionRecord& record, const GuardLimits& own, std::uint64_t host_memory);

// key=value summary of a record for a log line or a note.
std::string describe(const DecisionRecord& record);

}  // namespace gpurun
