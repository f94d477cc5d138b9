#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "decision/refusal.hpp"
#include "profiles/profile.hpp"

namespace gpurun {

// One engine's share of the container's /dev/shm: the figure, its parts, the arithmetic with this
// plan's numbers and the engine's source it is read from (docs/profiles-and-sizing.md, "The engine
// terms"). None of them is measured here.
struct EngineTerm {
  std::string engine;  // "vllm", "ray", "triton_python", "deepspeed"
  std::uint64_t bytes = 0;
  std::vector<std::pair<std::string, std::uint64_t>> parts;  // named pieces, for --json
  std::string formula;                                       // "broadcast 160MiB + ... = 664MiB"
  std::string source;
};

struct EnginesPlan {
  std::vector<EngineTerm> terms;  // in the order vllm, ray, triton_python, deepspeed
  std::uint64_t bytes = 0;        // their sum
  // Set when a term could not be sized (kVllmTensorParallel, kRayNoMemoryLimit).
  std::optional<Refusal> refusal;
};

// A memory limit that the door raises by the /dev/shm it plans (the webhook's raise policy) and
// that an engine then reads (Ray's default store is a share of the limit it finds: the raised one).
struct LimitRaise {
  std::uint64_t limit = 0;        // the container's limit before the raise
  double headroom = 1.0;          // the plan's (the raise is by the whole /dev/shm)
  std::uint64_t other_bytes = 0;  // the plan's bytes besides the engines: ranks x per_rank + nccl
};

// plasma keeps its store within this share of the free /dev/shm (src/ray/object_manager/plasma/
// store_runner.cc: shm_mem_avail = 9 * shm_mem_avail / 10, "a safety margin for allocator
// fragmentation"), below Ray's Python cap of 0.95: a store of B bytes needs B / 0.9 free.
inline constexpr long double kPlasmaShmShare = 0.9L;

// The terms of the profile's engines for `ranks` GPU ranks in one container with the container's
// memory limit, if known (Ray's default store is a fraction of it), or with `raise`, the limit
// the door raises by the plan: Ray's term then solves for the size whose raised limit still
// leaves Ray's store within plasma's share (docs/profiles-and-sizing.md, "The engine terms"). Pure.
EnginesPlan plan_engines(const Profile& profile, unsigned ranks, std::optional<std::uint64_t> memory_limit,
                         const std::optional<LimitRaise>& raise = std::nullopt);

// The per-engine figures, each a function of its own inputs (the unit tests work them by hand).
std::uint64_t vllm_ring_buffer_bytes(std::uint64_t max_chunk_bytes, std::uint64_t n_reader, std::uint64_t max_chunks);
std::uint64_t deepspeed_workspace_bytes();

// The engines' lines of `explain`, after the NCCL term.
void explain_engines(std::ostringstream& out, const EnginesPlan& plan);

// The engines of `plan_to_json`: {"bytes": N, "terms": [{"engine", "bytes", "parts", "formula",
// "source", "measured": false}]}.
nlohmann::json engines_plan_to_json(const EnginesPlan& plan);

}  // namespace gpurun
