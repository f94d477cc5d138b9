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

// The terms of the profile's engines for `ranks` GPU ranks in one container with the container's
// memory limit, if known (Ray's default store is a fraction of it). Pure.
EnginesPlan plan_engines(const Profile& profile, unsigned ranks, std::optional<std::uint64_t> memory_limit);

// The per-engine figures, each a function of its own inputs (the unit tests work them by hand).
std::uint64_t vllm_ring_buffer_bytes(std::uint64_t max_chunk_bytes, std::uint64_t n_reader, std::uint64_t max_chunks);
std::uint64_t deepspeed_workspace_bytes();

// The engines' lines of `explain`, after the NCCL term.
void explain_engines(std::ostringstream& out, const EnginesPlan& plan);

// The engines of `plan_to_json`: {"bytes": N, "terms": [{"engine", "bytes", "parts", "formula",
// "source", "measured": false}]}.
nlohmann::json engines_plan_to_json(const EnginesPlan& plan);

}  // namespace gpurun
