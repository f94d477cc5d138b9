#pragma once

#include "base/units.hpp"
#include "decision/shm_decision.hpp"
#include "fuzz/fuzz_input.hpp"

namespace gpurun::fuzz {

// A host with 8 CPUs, 4 GPUs and 64GiB, and the built-in profiles of the source tree.
inline const HostFacts& fixed_host() {
  static const HostFacts host{8, 4, 64 * kGiB};
  return host;
}

inline const ProfileStore& builtin_store() {
  static const ProfileStore store({GPU_RUN_FUZZ_PROFILES});
  return store;
}

// Decides for a container under a config with and without a default profile. decide_shm
// must never throw on container input, and a size it acts on must fit what it checked.
inline void check_decisions(const std::map<std::string, std::string>& state_annotations, const SpecFacts& spec) {
  const ContainerRequest request = container_request(state_annotations, spec);
  Config with_default;
  with_default.default_profile = "default";
  const Config without_default;
  const Config* const configs[] = {&with_default, &without_default};
  for (const Config* config : configs) {
    const ShmDecision d = decide_shm(request, spec, *config, builtin_store(), fixed_host());
    if (d.act) {
      GPU_RUN_FUZZ_CHECK(!d.error);
      GPU_RUN_FUZZ_CHECK(d.size >= kMiB);
      GPU_RUN_FUZZ_CHECK(d.size <= fixed_host().mem_total);
      if (spec.memory_limit)
        GPU_RUN_FUZZ_CHECK(static_cast<long double>(d.size) <=
                           static_cast<long double>(*spec.memory_limit) * config->memory_fraction_max);
    }
    if (!request.named_anything() && !config->default_profile) GPU_RUN_FUZZ_CHECK(!d.act);
    (void)describe(d);
  }
}

}  // namespace gpurun::fuzz
