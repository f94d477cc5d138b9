#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpurun {

namespace fs = std::filesystem;

// One tensor of a collated sample: shape is per sample, dtype uses PyTorch's names.
struct Field {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::string dtype;
};

// A measurement written by `gpu-run-ctl calibrate`: the peak /dev/shm use seen for a
// workload and the conditions it was taken under. The model scales it per batch.
struct Calibration {
  std::uint64_t peak_shm = 0;
  std::uint64_t workers = 0;
  std::uint64_t batch_size = 0;
  std::uint64_t gpus = 0;
  std::uint64_t prefetch_factor = 0;
  bool pin_memory = true;
  std::string measured_at;
  // The largest rise of use between two samples of the run the peak is from (profiles learn
  // writes it; none: calibrate's, or a profile written before): sizes the plan's margin.
  std::optional<std::uint64_t> burst_shm;
};

// What a profile knows of NCCL's /dev/shm use between the ranks on one node (docs/ARCHITECTURE.md,
// "The NCCL term"). Defaults are NCCL's own (src/init.cc DEFAULT_*BUFFSIZE; 2 channels).
struct NcclSpec {
  std::string transport = "shm";  // "shm": NCCL's SHM transport; "p2p" or "none": no segments per peer
  std::uint64_t channels = 2;
  std::uint64_t buffsize = 4194304;        // NCCL_BUFFSIZE (Simple protocol)
  std::uint64_t ll_buffsize = 524288;      // NCCL_LL_BUFFSIZE
  std::uint64_t ll128_buffsize = 4915200;  // NCCL_LL128_BUFFSIZE
  std::optional<std::uint64_t> measured;   // a measured figure for all ranks of a node
  // The ranks `measured` was taken with (gpu-run-ctl calibrate writes it): a plan for another
  // count scales the figure by its connections (ranks x peers). Unset: used as is.
  std::optional<std::uint64_t> measured_ranks;
  // Where the SHM transport's buffers live: "shm", files on /dev/shm; "cumem", cuMem host memory
  // (NCCL_CUMEM_HOST_ENABLE, NCCL 2.23 and later with CUDA 12.2), so none of them on /dev/shm.
  std::string host_mem = "shm";
};

// The engines besides the DataLoaders and NCCL that share the container's /dev/shm
// (docs/profiles-and-sizing.md, "The engine terms"). Each default is the engine's own, read from
// its source at the release the docs name.

// vLLM's shared-memory message queues (vllm/distributed/device_communicators/shm_broadcast.py).
struct VllmSpec {
  std::optional<std::uint64_t> tensor_parallel_size;      // unset: every GPU of the plan
  std::uint64_t mq_max_chunk_bytes = 16 * 1024 * 1024;    // VLLM_MQ_MAX_CHUNK_BYTES_MB
  std::uint64_t response_chunk_bytes = 24 * 1024 * 1024;  // MessageQueue's max_chunk_bytes default
  std::uint64_t max_chunks = 10;                          // MessageQueue's max_chunks default
  std::uint64_t kv_offloading_size = 0;                   // --kv-offloading-size, in /dev/shm
};

// Ray's object store (plasma) on a node.
struct RaySpec {
  std::optional<std::uint64_t> object_store_memory;  // unset: a fraction of the memory limit
  double object_store_fraction = 0.3;                // RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION
  std::uint64_t object_store_cap = 200000000000;     // RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES
  std::string plasma_directory = "/dev/shm";         // elsewhere: the store is not on /dev/shm
};

// NVIDIA Triton's python backend: one shared-memory pool per model instance.
struct TritonPythonSpec {
  std::uint64_t instances = 1;                        // python-backend model instances, all models
  std::uint64_t shm_default_byte_size = 1024 * 1024;  // --backend-config=python,shm-default-byte-size
  std::uint64_t shm_growth_byte_size = 1024 * 1024;   // --backend-config=python,shm-growth-byte-size
  std::uint64_t inflight_bytes = 0;                   // tensors one instance's pool holds at once
};

// DeepSpeed's shared-memory CPU all-reduce (its CPU accelerator, every rank on this node).
struct DeepSpeedSpec {
  std::optional<std::uint64_t> ranks;  // unset: the plan's ranks
};

struct Engines {
  std::optional<VllmSpec> vllm;
  std::optional<RaySpec> ray;
  std::optional<TritonPythonSpec> triton_python;
  std::optional<DeepSpeedSpec> deepspeed;

  bool empty() const { return !vllm && !ray && !triton_python && !deepspeed; }
};

// How a DataLoader's collate function puts a batch into shared memory: `stack`, one tensor per
// field for the whole batch (default_collate, which stacks into a shared storage in the worker, and
// padding collators, whose batch tensor is moved there when the worker sends it); `list`, each
// sample's own tensors as they are (torchvision's detection references, `tuple(zip(*batch))`), so
// each is a segment of its own, page-rounded per sample.
enum class Collate { stack, list };

// When a DataLoader runs against the others: `any` (the model counts every order: its passes may
// run while any other loader's batches are in /dev/shm, before or after them); `first` (its workers
// start once, before any other loader has yielded a batch, and live through the others' passes:
// persistent_workers, or a single pass such as one epoch; a training loader with no validation
// pass before training, so they inherit none of the others' batches); or `last` (one pass after
// every other loader's last pass has ended, its iterator exhausted or dropped: a test pass after
// training; it is never alive with the others' prefetched batches, and no worker starts after it).
enum class LoaderOrder { any, first, last };
const char* loader_order_name(LoaderOrder order);  // "any", "first", "last"

// One DataLoader the job keeps alive. Unset values come from the profile's top-level keys.
struct Loader {
  std::string name;
  std::vector<Field> fields;  // empty with sample_bytes, or when both are unset
  std::optional<std::uint64_t> sample_bytes;
  std::optional<std::uint64_t> batch_size;
  std::optional<std::uint64_t> workers;  // nullopt with workers_auto: "auto"
  bool workers_auto = false;
  std::optional<std::uint64_t> prefetch_factor;
  std::optional<bool> pin_memory;
  bool persistent_workers = false;
  std::optional<Collate> collate;
  LoaderOrder order = LoaderOrder::any;
};

// The profile every profile without "extends" extends, and the fallback when nothing names one.
inline constexpr const char* kDefaultProfileName = "default";

// A fully merged profile (extends resolved, every key present).
struct Profile {
  std::string name;
  std::string description;
  std::vector<Field> fields;  // empty when sample_bytes is used
  std::optional<std::uint64_t> sample_bytes;
  std::uint64_t batch_size = 0;
  std::optional<std::uint64_t> workers_per_gpu;  // nullopt means "auto"
  std::uint64_t prefetch_factor = 0;
  bool pin_memory = true;
  Collate collate = Collate::stack;  // "collate": "stack" unless set
  double headroom = 1.0;
  std::uint64_t nccl_reserve = 0;  // a flat figure (profiles before the nccl section); used without nccl
  std::optional<NcclSpec> nccl;    // set: the NCCL term comes from it, not from nccl_reserve
  Engines engines;                 // the other engines on /dev/shm; none unless the profile names them
  std::vector<Loader> loaders;     // empty: one loader, the top-level keys
  std::uint64_t min_shm = 0;
  std::uint64_t max_shm = 0;
  std::optional<Calibration> calibration;
  // The files that made this profile, the profile's own first, then each parent.
  std::vector<fs::path> chain;
};

// The dtypes a profile's fields may name, for messages.
inline constexpr const char* kDtypeNames =
    "one of float64 float32 float16 bfloat16 int64 int32 int16 int8 uint8 bool, or PyTorch's double float half "
    "long int short (torch.NAME too)";

// A PyTorch dtype's name as profiles write it: "float32" for float32, float, torch.float and
// torch.float32; nullopt for a name PyTorch does not have.
std::optional<std::string> canonical_dtype(const std::string& dtype);

// Size in bytes of one element of a PyTorch dtype (any name canonical_dtype knows); throws
// Error for unknown names.
std::uint64_t dtype_size(const std::string& dtype);

// Bytes of one sample: sum of prod(shape) * dtype_size, or sample_bytes.
std::uint64_t sample_bytes(const Profile& profile);

// True when `name` is a valid profile name: `[team/]name`, each part
// `[a-z0-9][a-z0-9._-]{0,62}` (so no "..", no absolute paths).
bool is_valid_profile_name(const std::string& name);

// Parses one profile file's text strictly: unknown keys, wrong types and bad values are
// Errors naming `source` and the key; syntax errors give source:line:column. The result
// holds only the keys the file sets (validated), for merging along `extends`.
nlohmann::json parse_profile_document(const std::string& text, const std::string& source);

// Merges a child document over its parent's (already merged) document.
nlohmann::json merge_profile_documents(const nlohmann::json& parent, const nlohmann::json& child);

// Turns a merged document into a Profile; every required key must be present.
Profile profile_from_document(const nlohmann::json& doc, const std::string& source);

// The document of a merged profile: every key, in the built-in profiles' order. The one
// writer of a profile's keys: sizes a person sets (nccl_reserve, min_shm, max_shm) in the
// largest exact unit ("256m"), measured ones (calibration.peak_shm, nccl.measured) and NCCL's
// buffer sizes as byte counts.
nlohmann::ordered_json profile_to_json(const Profile& profile);

// A profile file as gpu-run writes one: the name and the keys in `keys`, the rest from the
// parent. A key is a top-level one ("batch_size", "nccl" for the whole section) or one of the
// nccl section ("nccl.measured"); one the profile has no value for (fields when it has
// sample_bytes, nccl_reserve when it has an nccl section) is left out.
struct ProfileFile {
  Profile profile;
  std::vector<std::string> keys;
  std::optional<std::string> extends;  // nullopt: no "extends" key, so the parent is default
  bool standalone = false;             // "extends": null: no parent, every key set
};

// Every key profile_to_json writes after "name", in its order.
const std::vector<std::string>& profile_document_keys();

// The document of `file`, its keys in profile_to_json's order, from profile_to_json.
nlohmann::ordered_json profile_file_document(const ProfileFile& file);

// A profile document's text as the built-in profiles are written: two-space indent, a line for
// each key, for each field and loader, and for each key of the calibration block.
std::string profile_text(const nlohmann::ordered_json& doc);

}  // namespace gpurun
