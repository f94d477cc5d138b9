// A bundle's config.json as the runtime wrapper and the hook read and rewrite it.
#include <nlohmann/json.hpp>

#include "error.hpp"
#include "fuzz_decision.hpp"
#include "oci.hpp"

using namespace gpurun;
using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  json spec;
  try {
    spec = json::parse(fuzz::as_string(data, size));
  } catch (const json::exception&) {
    return 0;  // load_spec turns this (parse_error, out_of_range for 1e999) into an Error
  }
  if (!spec.is_object()) return 0;  // so does this

  SpecFacts facts;
  try {
    facts = spec_facts(spec, "/run/bundle");
  } catch (const Error&) {
    return 0;
  }
  GPU_RUN_FUZZ_CHECK(facts.rootfs.is_absolute());
  fuzz::check_decisions({}, facts);

  const std::uint64_t size_bytes = 3 * kGiB + 4096;
  const int idx = find_shm_mount(spec);
  if (idx >= 0) {
    json& mount = spec["mounts"][static_cast<std::size_t>(idx)];
    set_tmpfs_size(mount, size_bytes);
    // What the runtime wrote must be what the hook reads back.
    const SpecFacts after = spec_facts(spec, "/run/bundle");
    GPU_RUN_FUZZ_CHECK(after.shm_size && *after.shm_size == size_bytes);
    GPU_RUN_FUZZ_CHECK(find_shm_mount(spec) == idx);
  }
  const std::vector<std::string> args = {"gpu-run-hook", "createRuntime"};
  const bool added = add_hook(spec, "createRuntime", "/usr/bin/gpu-run-hook", args);
  GPU_RUN_FUZZ_CHECK(!add_hook(spec, "createRuntime", "/usr/bin/gpu-run-hook", args));
  if (added) GPU_RUN_FUZZ_CHECK(spec["hooks"]["createRuntime"].is_array());
  const std::string out = spec.dump(2);
  // The rewritten spec must parse again (the runtime renames it over config.json).
  GPU_RUN_FUZZ_CHECK(json::parse(out).is_object());
  return 0;
}
