#pragma once

// The container contract: how a container asks gpu-run for a /dev/shm size (annotations,
// which win, and environment variables), and what gpu-run tells a container it sized
// (environment variables) and the engine (labels). Every door reads and writes these names
// through this file only; docs/ARCHITECTURE.md ("The container contract") lists them.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpurun {

// One thing a container can ask for.
enum class RequestKey { kProfile, kGpus, kWorkers, kBatchSize, kShmSize };

struct RequestKeySpec {
  RequestKey key;
  const char* name;        // "profile": the annotation's suffix and the flag --profile, in messages too
  const char* annotation;  // "gpu-run.profile"
  const char* env;         // "GPU_RUN_PROFILE"
  // Another name of the same key in the environment, read exactly as `env` by every door (the
  // wrapper's -e, a spec's process.env, a pod's env); both given with two values is refused.
  const char* env_alias = nullptr;  // "GPU_RUN_NUM_WORKERS"
};

inline constexpr const char* kAnnotationPrefix = "gpu-run.";
inline constexpr std::array<RequestKeySpec, 5> kRequestKeys = {{
    {RequestKey::kProfile, "profile", "gpu-run.profile", "GPU_RUN_PROFILE"},
    {RequestKey::kGpus, "gpus", "gpu-run.gpus", "GPU_RUN_GPUS"},
    {RequestKey::kWorkers, "workers", "gpu-run.workers", "GPU_RUN_WORKERS", "GPU_RUN_NUM_WORKERS"},
    {RequestKey::kBatchSize, "batch-size", "gpu-run.batch-size", "GPU_RUN_BATCH_SIZE"},
    {RequestKey::kShmSize, "shm-size", "gpu-run.shm-size", "GPU_RUN_SHM_SIZE"},
}};

// CRI-O's own /dev/shm size annotation, honoured as a shm-size request when no gpu-run
// key gives one.
inline constexpr const char* kCrioShmSizeAnnotation = "io.kubernetes.cri-o.ShmSize";

// The webhook's annotation naming the containers of a pod to give /dev/shm (comma-separated),
// instead of those that request GPUs. It says where, not what: not a request key.
inline constexpr const char* kContainersAnnotation = "gpu-run.containers";

// How the CRI runtimes mark the containers of a pod: "sandbox" for the pod's pause container,
// "container" for an app container, which joins the sandbox's ipc namespace and bind-mounts
// the pod's /dev/shm (one tmpfs for the whole pod). The sandbox sizes the pod; an app
// container may grow the pod's /dev/shm to its own plan, never shrink it.
inline constexpr const char* kCriContainerTypeAnnotation = "io.kubernetes.cri.container-type";    // containerd
inline constexpr const char* kCrioContainerTypeAnnotation = "io.kubernetes.cri-o.ContainerType";  // CRI-O
inline constexpr const char* kPodAppContainerType = "container";

const RequestKeySpec& request_key(RequestKey key);

// The request key an environment variable names (its `env` or its `env_alias`), or null.
const RequestKeySpec* request_key_of_env(const std::string& name);

// One key's value read from an environment under each of its names: none, the one given, or
// the refusal of two different values ("GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one
// key (workers) with two values: give one"). `conflict` is empty unless both differ.
struct EnvValue {
  const std::string* value = nullptr;  // into `env`
  std::string name;                    // the name it was given under
  std::string conflict;
};
EnvValue env_value(const std::map<std::string, std::string>& env, const RequestKeySpec& key);

// True when `annotations` (a spec's, set by containerd or CRI-O) mark an app container of a pod.
bool is_pod_app_container(const std::map<std::string, std::string>& annotations);

// True when `annotations` mark any container of a pod: its sandbox or an app container.
bool is_pod_container(const std::map<std::string, std::string>& annotations);

// True when `annotations` hold any of the request keys above (not CRI-O's).
bool has_request_annotation(const std::map<std::string, std::string>& annotations);

// The POSIX ERE that makes podman/CRI-O inject the hook (hooks.d "when.annotations"),
// derived from kRequestKeys: "^gpu-run\.(profile|gpus|...)$".
std::string request_annotation_pattern();

// The glob patterns (Go's path.Match, as containerd matches pod_annotations) that let every
// request annotation, CRI-O's ShmSize included, through a CRI runtime handler to the OCI spec:
// "gpu-run.*", "io.kubernetes.cri-o.ShmSize".
std::vector<std::string> request_annotation_globs();

// What gpu-run tells a container it sized: each key under the request's own name, holding the
// request as gpu-run planned it (GPU_RUN_WORKERS is the workers asked, or those planned).
inline constexpr const char* kEnvProfile = "GPU_RUN_PROFILE";
inline constexpr const char* kEnvGpus = kRequestKeys[1].env;
inline constexpr const char* kEnvWorkers = kRequestKeys[2].env;
// The workers' other name (kRequestKeys' env_alias): read as GPU_RUN_WORKERS is, and still written
// beside it for the jobs that read it.
inline constexpr const char* kEnvNumWorkers = kRequestKeys[2].env_alias;
inline constexpr const char* kEnvBatchSize = "GPU_RUN_BATCH_SIZE";
inline constexpr const char* kEnvShmSize = "GPU_RUN_SHM_SIZE";
// The most the node guard may grow a pod's emptyDir /dev/shm to: its sizeLimit (the webhook).
inline constexpr const char* kEnvShmLimit = "GPU_RUN_SHM_LIMIT";
// ...and the engine (labels on the container, read back by watch, doctor and the guard).
inline constexpr const char* kLabelProfile = "gpu-run.profile";
inline constexpr const char* kLabelGpus = kRequestKeys[1].annotation;
inline constexpr const char* kLabelShmSize = "gpu-run.shm-size";
// On a container whose explicit size (gpu-run.shm-size) a person kept over the memory budget
// (gpu-run --over-budget), with the value "chosen".
inline constexpr const char* kLabelOverBudget = "gpu-run.over-budget";
// What a door decided, once, as JSON (decision_record.hpp): the wrapper's label, the runtime's spec
// annotation, the webhook's and `gpu-run-ctl k8s`'s pod annotation, all of this name; the
// hook, which cannot change the spec, writes it to <kDecisionDir>/<container id>.json.
inline constexpr const char* kDecisionKey = "gpu-run.decision";
// The same record in a container's environment, from the webhook: containerd copies a pod's
// annotations into the spec only for a runtime handler that lists them (pod_annotations), while
// the environment reaches the guard on any node (plain runc).
inline constexpr const char* kEnvDecision = "GPU_RUN_DECISION";
inline constexpr const char* kDecisionDir = "/run/gpu-run/decisions";
// The node label of a node whose containerd has gpu-run's runtime handler, its value the
// handler's name: the RuntimeClass's scheduling.nodeSelector (gpu-run-ctl k8s runtimeclass), put
// on each node with the `kubectl label node` line configure containerd prints.
inline constexpr const char* kRuntimeNodeLabel = "gpu-run.io/runtime";

using NameValues = std::vector<std::pair<std::string, std::string>>;

// The environment of a container gpu-run planned: profile, GPUs (when any), workers and batch
// size per rank, and the /dev/shm size it gets (engine syntax, e.g. "1536m"); no size when
// gpu-run did not apply one (`--ipc=host`: the container uses another /dev/shm).
NameValues container_env(const std::string& profile, unsigned gpus, std::uint64_t workers, std::uint64_t batch_size,
                         std::optional<std::uint64_t> shm_bytes);

// The labels of a container gpu-run planned: profile, GPUs (when any), the size it applied (if any).
NameValues container_labels(const std::string& profile, unsigned gpus, std::optional<std::uint64_t> shm_bytes);

// Every GPU_RUN_* name a container may carry (requests and what gpu-run set), for doctor.
std::vector<std::string> contract_env_names();

}  // namespace gpurun
