#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "env.hpp"
#include "host.hpp"
#include "k8s_quantity.hpp"
#include "sizing.hpp"
#include "sizing_flags.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// Memory assumed per GPU rank for the training processes themselves when --memory is not
// given (the pod's memory is this base plus /dev/shm).
constexpr std::uint64_t kK8sBaseMemoryPerRank = 4ull << 30;

// `gpu-run-ctl k8s`: a strategic-merge patch for a pod spec that gives the container a
// memory-backed /dev/shm of the planned size (Kubernetes has no shmSize).
struct K8sOptions {
  SizingFlags sizing;                 // --profile and --gpus required; --gpus a count: nvidia.com/gpu
  std::optional<std::string> memory;  // the base memory, a Kubernetes quantity
  std::optional<std::string> cpus;    // CPUs of the pod, for workers_per_gpu "auto"
  std::optional<std::string> runtime_class;
  std::string container;        // required: a strategic merge adds a container it does not find by name
  std::string format = "yaml";  // yaml | json
};

// The patch for a plan: spec.volumes (emptyDir, medium Memory, sizeLimit = shm), the container
// (name, env, resources, the /dev/shm mount) and spec.runtimeClassName when asked. Pure.
// Throws Error (exit 2) on a missing or bad container name, a bad runtime class name or --memory.
nlohmann::ordered_json k8s_patch(const K8sOptions& options, const ShmPlan& plan);

// The plan for the options (as `plan` would make it, without a memory check: the pod's memory
// is raised by the shm size), then the patch in --format. Throws Error (exit 2) on bad input
// or when the plan is above the profile's max_shm.
std::string render_k8s(const K8sOptions& options, const Config& config, const HostInfo& host,
                       const EnvLookup& env = process_env);

void run_k8s(const K8sOptions& options);

// The RuntimeClass (node.k8s.io/v1) named `handler` that selects the containerd runtime
// handler `handler` (`gpu-run-ctl configure containerd`), as YAML. Throws Error (exit 2)
// when `handler` is not a DNS label. Pure.
std::string runtime_class_manifest(const std::string& handler);

// Registers `k8s` on `app`.
void add_k8s_command(CLI::App& app);

}  // namespace gpurun
