// A bundle's config.json as the runtime wrapper and the hook read and rewrite it.
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "fuzz/fuzz_decision.hpp"
#include "oci/oci.hpp"

using namespace gpurun;
using nlohmann::json;

namespace {

bool same_facts(const SpecFacts& a, const SpecFacts& b) {
  return a.rootfs == b.rootfs && a.annotations == b.annotations && a.env == b.env && a.memory_limit == b.memory_limit &&
         a.cpu_quota == b.cpu_quota && a.cpuset_cpus == b.cpuset_cpus && a.gpu_devices == b.gpu_devices &&
         a.has_ipc_namespace == b.has_ipc_namespace && a.ipc_namespace_path == b.ipc_namespace_path &&
         a.shm_type == b.shm_type && a.shm_source == b.shm_source && a.shm_size == b.shm_size;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  // The hook parses only the facts (SpecParts::kFacts), the runtime wrapper the whole spec:
  // both must accept the same texts and see the same facts.
  json spec, facts_only;
  bool whole_ok = true, facts_ok = true;
  try {
    spec = parse_spec(text, SpecParts::kWhole, "config.json");
  } catch (const Error&) {
    whole_ok = false;
  }
  try {
    facts_only = parse_spec(text, SpecParts::kFacts, "config.json");
  } catch (const Error&) {
    facts_ok = false;
  }
  GPU_RUN_FUZZ_CHECK(whole_ok == facts_ok);
  if (!whole_ok) return 0;

  SpecFacts facts;
  try {
    facts = spec_facts(spec, "/run/bundle");
  } catch (const Error&) {
    bool facts_only_throws = false;
    try {
      spec_facts(facts_only, "/run/bundle");
    } catch (const Error&) {
      facts_only_throws = true;
    }
    GPU_RUN_FUZZ_CHECK(facts_only_throws);
    return 0;
  }
  GPU_RUN_FUZZ_CHECK(same_facts(facts, spec_facts(facts_only, "/run/bundle")));
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
