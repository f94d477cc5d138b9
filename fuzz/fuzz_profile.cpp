// A profile file -> validated document -> merged over default -> Profile -> plan. Sizing must
// not overflow or hit undefined behaviour on any profile that validation accepts.
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/sizing.hpp"
#include "fuzz/fuzz_input.hpp"
#include "profiles/profile.hpp"

using namespace gpurun;
using nlohmann::json;

namespace {

using u128 = unsigned __int128;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

const json& default_document() {
  static const json doc = parse_profile_document(R"({
    "name": "default",
    "fields": [{"name": "image", "shape": [3, 224, 224], "dtype": "float32"},
               {"name": "label", "shape": [], "dtype": "int64"}],
    "batch_size": 32, "workers_per_gpu": "auto", "prefetch_factor": 2, "pin_memory": true,
    "headroom": 1.25, "nccl_reserve": "512m", "min_shm": "256m", "max_shm": "256g"})",
                                                 "default.json");
  return doc;
}

// The requests a container or a person can make, at the bounds the parsers allow.
std::vector<SizingRequest> requests() {
  std::vector<SizingRequest> out;
  out.emplace_back();
  SizingRequest big;
  big.gpus = 1024;
  big.workers = 1024;
  big.batch_size = 1u << 20;
  big.prefetch_factor = 1024;
  big.cpus = 4096;
  out.push_back(big);
  SizingRequest limited;
  limited.gpus = 8;
  limited.memory_limit = 16 * kGiB;
  limited.cpus = 64;
  out.push_back(limited);
  SizingRequest tiny;
  tiny.gpus = 2;
  tiny.workers = 0;
  tiny.memory_limit = 1;
  tiny.memory_fraction_max = 1e-300;
  out.push_back(tiny);
  SizingRequest huge_limit = big;
  huge_limit.memory_limit = kMax;
  huge_limit.memory_fraction_max = 1e-9;
  out.push_back(huge_limit);
  return out;
}

std::uint64_t sat(u128 v) { return v > kMax ? kMax : static_cast<std::uint64_t>(v); }

void check_plan(const Profile& profile, const ShmPlan& p) {
  GPU_RUN_FUZZ_CHECK(p.shm >= p.need);
  GPU_RUN_FUZZ_CHECK(p.shm >= p.min_shm);
  GPU_RUN_FUZZ_CHECK(p.ranks >= 1);
  if (p.workers > 0) GPU_RUN_FUZZ_CHECK(p.per_rank >= p.batch_bytes);
  GPU_RUN_FUZZ_CHECK(p.need >= p.per_rank);
  if (!p.calibrated) {
    // Each field's bytes, computed again without any chance of wrapping.
    std::uint64_t total = 0;
    std::size_t i = 0;
    for (const Field& f : profile.fields) {
      u128 n = static_cast<u128>(p.batch_size) * dtype_size(f.dtype);
      bool over = n > kMax;
      for (auto d : f.shape) {
        if (!over) n *= d;
        over = over || n > kMax;
      }
      std::uint64_t expect = over ? kMax : round_up(static_cast<std::uint64_t>(n), 4096);
      GPU_RUN_FUZZ_CHECK(i < p.fields.size() && p.fields[i].bytes == expect);
      total = sat(static_cast<u128>(total) + expect);
      ++i;
    }
    if (!profile.sample_bytes) GPU_RUN_FUZZ_CHECK(p.batch_bytes == total);
  }
  (void)explain(p);
  (void)plan_to_json(p).dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  json doc;
  try {
    doc = parse_profile_document(text, "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  for (const json& merged : {doc, merge_profile_documents(default_document(), doc)}) {
    Profile profile;
    try {
      profile = profile_from_document(merged, "fuzz.json");
    } catch (const Error&) {
      continue;
    }
    (void)profile_to_json(profile).dump();
    for (const SizingRequest& r : requests()) {
      ShmPlan plan = plan_shm(profile, r);
      check_plan(profile, plan);
      try {
        require_fits(plan);
      } catch (const Error&) {
      }
    }
  }
  return 0;
}
