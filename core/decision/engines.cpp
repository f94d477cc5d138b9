#include "decision/engines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/units.hpp"

namespace gpurun {
namespace {

constexpr std::uint64_t kShmPage = 4096;

// vLLM: the tensor-parallel group's broadcaster (parallel_state.py GroupCoordinator.__init__:
// MessageQueue.create_from_process_group(cpu_group, 1 << 22, 6)).
constexpr std::uint64_t kVllmGroupChunkBytes = 1 << 22;
constexpr std::uint64_t kVllmGroupChunks = 6;

// DeepSpeed csrc/cpu/comm/shm.cpp: struct allreduce_workspace { enum coll_state states[2]; char
// buffer[2 * NAIVE_ALLREDUCE_THRESHOLD + 2 * MAX_BUF_SIZE]; } with NAIVE_ALLREDUCE_THRESHOLD 1 MiB
// and MAX_BUF_SIZE 32 MiB; the enum is an int.
constexpr std::uint64_t kDeepSpeedStates = 2 * 4;
constexpr std::uint64_t kDeepSpeedNaiveThreshold = 1024 * 1024;
constexpr std::uint64_t kDeepSpeedMaxBuf = 32 * 1024 * 1024;

const char* const kVllmSource =
    "vLLM main at 9aaf83ef (2026-05-19): distributed/device_communicators/shm_broadcast.py ShmRingBuffer "
    "(total_bytes_of_buffer = (max_chunk_bytes + 1 + n_reader) x max_chunks), v1/executor/multiproc_executor.py "
    "(rpc_broadcast_mq, VLLM_MQ_MAX_CHUNK_BYTES_MB; worker_response_mq = MessageQueue(1, 1) per worker), "
    "distributed/parallel_state.py GroupCoordinator (the TP group's mq_broadcaster, 1 << 22 x 6); "
    "check_shm_free_space (vllm#48879) refuses each ring larger than the free /dev/shm";
const char* const kRaySource =
    "Ray python/ray/_private/ray_constants.py (DEFAULT_OBJECT_STORE_MEMORY_PROPORTION 0.3, "
    "DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES 200e9), resource_and_label_spec.py _resolve_memory_resources, "
    "services.py determine_plasma_store_config (the store goes to /dev/shm when its free bytes exceed it)";
const char* const kTritonSource =
    "triton-inference-server/python_backend r26.07: src/python_be.cc (shm-default-byte-size and "
    "shm-growth-byte-size 1 MiB since r23.09, 64 MiB before), src/stub_launcher.cc StubLauncher::Setup (one pool "
    "per model instance), src/shm_manager.cc SharedMemoryManager::GrowIfNeeded";
const char* const kDeepSpeedSource =
    "DeepSpeed v0.19.5 csrc/cpu/comm/shm.cpp shm_initialize (one allreduce_workspace per rank, written whole; "
    "this layout since v0.14.4), shm_interface.cpp initialize (only when every rank is on this node)";

// ceil(v) in bytes, saturating (a conversion past UINT64_MAX is undefined behaviour).
std::uint64_t store_bytes(long double v) {
  if (!(v < 18446744073709551615.0L)) return UINT64_MAX;
  return v <= 0 ? 0 : static_cast<std::uint64_t>(std::ceil(v));
}

std::string times(std::uint64_t n) { return std::to_string(n) + " x "; }

EngineTerm vllm_term(const VllmSpec& s, unsigned ranks, std::optional<Refusal>& refusal) {
  EngineTerm t;
  t.engine = "vllm";
  t.source = kVllmSource;
  const std::uint64_t world = std::max(1u, ranks);
  const std::uint64_t tp = s.tensor_parallel_size.value_or(world);
  const std::uint64_t kv = round_up(s.kv_offloading_size, kShmPage);
  std::string kv_text = kv ? " + kv_offloading_size " + format_size(kv) : "";
  if (world % tp != 0) {
    refusal = Refusal{};
    refusal->kind = RefusalKind::kVllmTensorParallel;
    refusal->ranks = static_cast<unsigned>(world);
    refusal->tensor_parallel = tp;
    t.formula = "not sized: tensor_parallel_size " + std::to_string(tp) + " does not divide the " +
                std::to_string(world) + " GPU(s) of the plan";
    return t;
  }
  if (world == 1) {
    // ParallelConfig: a world of one runs the "uni" executor in the engine's process, no queue.
    t.bytes = kv;
    t.parts = {{"world_size", 1}, {"kv_offload_bytes", kv}};
    t.formula = "0 message queues (one GPU: vLLM's uni executor starts none)" + kv_text + " = " + format_mib(t.bytes);
    return t;
  }
  const std::uint64_t pp = world / tp;
  const std::uint64_t broadcast = vllm_ring_buffer_bytes(s.mq_max_chunk_bytes, world, s.max_chunks);
  const std::uint64_t response = vllm_ring_buffer_bytes(s.response_chunk_bytes, 1, s.max_chunks);
  const std::uint64_t responses = sat_mul(world, response);
  const std::uint64_t group = tp > 1 ? vllm_ring_buffer_bytes(kVllmGroupChunkBytes, tp - 1, kVllmGroupChunks) : 0;
  const std::uint64_t groups = sat_mul(pp, group);
  t.bytes = sat_add(sat_add(broadcast, responses), sat_add(groups, kv));
  t.parts = {{"world_size", world},          {"tensor_parallel_size", tp},  {"pipeline_parallel_size", pp},
             {"broadcast_bytes", broadcast}, {"response_bytes", responses}, {"tp_group_bytes", groups},
             {"kv_offload_bytes", kv}};
  const std::string chunks = ") x " + std::to_string(s.max_chunks) + " chunks ";
  t.formula =
      "broadcast (" + format_size(s.mq_max_chunk_bytes) + " + 1 + " + std::to_string(world) + chunks +
      format_size(broadcast) + " + " + times(world) + "response (" + format_size(s.response_chunk_bytes) + " + 2" +
      chunks + format_size(response) +
      (tp > 1 ? " + " + times(pp) + "TP group (4MiB + " + std::to_string(tp) + ") x 6 chunks " + format_size(group)
              : "") +
      kv_text + " = " + format_mib(t.bytes) + "; world " + std::to_string(world) + " = tensor parallel " +
      std::to_string(tp) + " x pipeline " + std::to_string(pp) + ", each ring page-rounded";
  return t;
}

bool on_dev_shm(const std::string& dir) { return dir == "/dev/shm" || dir.rfind("/dev/shm/", 0) == 0; }

EngineTerm ray_term(const RaySpec& s, std::optional<std::uint64_t> memory_limit, const std::optional<LimitRaise>& raise,
                    std::uint64_t other_engines, std::optional<Refusal>& refusal) {
  EngineTerm t;
  t.engine = "ray";
  t.source = kRaySource;
  if (!on_dev_shm(s.plasma_directory)) {
    t.formula = "0 (plasma_directory " + s.plasma_directory + ": the object store is not on /dev/shm)";
    return t;
  }
  if (s.object_store_memory) {
    t.bytes = round_up(*s.object_store_memory, kShmPage);
    t.parts = {{"object_store_memory", *s.object_store_memory}};
    t.formula = "object_store_memory " + format_mib(t.bytes) + ", the profile's engines.ray";
    return t;
  }
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%g", s.object_store_fraction);
  if (!memory_limit && !raise) {
    refusal = Refusal{};
    refusal->kind = RefusalKind::kRayNoMemoryLimit;
    refusal->object_store_fraction = s.object_store_fraction;
    t.formula = "not sized: the object store defaults to " + std::string(fraction) +
                " of the container's memory and the plan has no memory limit";
    return t;
  }
  const long double p = s.object_store_fraction;
  const std::uint64_t at_cap = store_bytes(static_cast<long double>(s.object_store_cap) / kPlasmaShmShare);
  if (raise) {
    // Ray reads the raised limit L + S, S = headroom x (others + T): the store p x (L + S) fits
    // plasma's 0.9 of T when T = (p L + p h others) / (0.9 - p h), or the cap's share.
    const long double h = raise->headroom;
    const long double others = static_cast<long double>(sat_add(raise->other_bytes, other_engines));
    const long double denominator = kPlasmaShmShare - p * h;
    const std::uint64_t solved =
        denominator > 0 ? store_bytes((p * static_cast<long double>(raise->limit) + p * h * others) / denominator)
                        : at_cap;
    t.bytes = round_up(std::min(solved, at_cap), kShmPage);
    const std::uint64_t raised = raise->limit + static_cast<std::uint64_t>(h * (others + t.bytes));
    const std::uint64_t store =
        std::min(static_cast<std::uint64_t>(static_cast<long double>(raised) * p), s.object_store_cap);
    t.parts = {{"object_store_memory", store}, {"memory_limit", raise->limit}, {"raised_memory_limit", raised}};
    t.formula = std::string(fraction) + " x (memory limit " + format_size(raise->limit) +
                " + the /dev/shm it is raised by) within plasma's 0.9 of the store's share: (" + fraction + " x " +
                format_size(raise->limit) + " + " + fraction + " x headroom x others " +
                format_size(static_cast<std::uint64_t>(others)) + ") / (0.9 - " + fraction +
                " x headroom), at most cap " + format_size(s.object_store_cap) + " / 0.9 = " + format_mib(t.bytes) +
                " (Ray reads the raised limit: a store of " + format_size(store) + ")";
    return t;
  }
  // int(avail_memory * proportion), avail_memory at most the limit (Ray reads the cgroup's), in
  // plasma's 0.9 of the free /dev/shm.
  const auto share = static_cast<std::uint64_t>(static_cast<long double>(*memory_limit) * p);
  const std::uint64_t store = std::min(share, s.object_store_cap);
  t.bytes = round_up(store_bytes(static_cast<long double>(store) / kPlasmaShmShare), kShmPage);
  t.parts = {{"object_store_memory", store}, {"memory_limit", *memory_limit}};
  t.formula = "min(" + std::string(fraction) + " x memory limit " + format_size(*memory_limit) + ", cap " +
              format_size(s.object_store_cap) +
              ") / 0.9 (plasma's share of the free /dev/shm) = " + format_mib(t.bytes) +
              ", Ray's default object store: a fraction of the memory it finds";
  return t;
}

EngineTerm triton_term(const TritonPythonSpec& s) {
  EngineTerm t;
  t.engine = "triton_python";
  t.source = kTritonSource;
  // GrowIfNeeded adds shm_growth_bytes * (byte_size / shm_growth_bytes + 1) for what does not fit.
  const std::uint64_t g = s.shm_growth_byte_size;
  const std::uint64_t growth = s.inflight_bytes ? sat_mul(g, s.inflight_bytes / g + 1) : 0;
  const std::uint64_t pool = round_up(sat_add(s.shm_default_byte_size, growth), kShmPage);
  t.bytes = sat_mul(s.instances, pool);
  t.parts = {{"instances", s.instances}, {"pool_bytes", pool}, {"growth_bytes", growth}};
  t.formula = "instances " + times(s.instances) + "(shm-default-byte-size " + format_size(s.shm_default_byte_size) +
              (s.inflight_bytes ? " + growth for inflight " + format_size(s.inflight_bytes) + ": " + format_size(g) +
                                      " x " + std::to_string(s.inflight_bytes / g + 1) + " = " + format_size(growth)
                                : "") +
              ") = " + format_mib(t.bytes);
  return t;
}

EngineTerm deepspeed_term(const DeepSpeedSpec& s, unsigned ranks) {
  EngineTerm t;
  t.engine = "deepspeed";
  t.source = kDeepSpeedSource;
  const std::uint64_t n = s.ranks.value_or(std::max(1u, ranks));
  t.bytes = sat_mul(n, deepspeed_workspace_bytes());
  t.parts = {{"ranks", n}, {"workspace_bytes", deepspeed_workspace_bytes()}};
  t.formula = "ranks " + times(n) + "allreduce workspace (2 x 1MiB + 2 x 32MiB + 8) " +
              format_size(deepspeed_workspace_bytes()) + " = " + format_mib(t.bytes);
  return t;
}

}  // namespace

std::uint64_t vllm_ring_buffer_bytes(std::uint64_t max_chunk_bytes, std::uint64_t n_reader, std::uint64_t max_chunks) {
  // ShmRingBuffer: max_chunks chunks of data, then a metadata byte per chunk for the writer and one
  // per reader; SharedMemory's file is allocated in pages.
  return round_up(sat_mul(sat_add(max_chunk_bytes, sat_add(1, n_reader)), max_chunks), kShmPage);
}

std::uint64_t deepspeed_workspace_bytes() {
  return round_up(kDeepSpeedStates + 2 * kDeepSpeedNaiveThreshold + 2 * kDeepSpeedMaxBuf, kShmPage);
}

EnginesPlan plan_engines(const Profile& profile, unsigned ranks, std::optional<std::uint64_t> memory_limit,
                         const std::optional<LimitRaise>& raise) {
  EnginesPlan plan;
  const Engines& e = profile.engines;
  std::optional<Refusal> vllm_refusal;
  std::optional<Refusal> ray_refusal;
  if (e.vllm) plan.terms.push_back(vllm_term(*e.vllm, ranks, vllm_refusal));
  if (e.triton_python) plan.terms.push_back(triton_term(*e.triton_python));
  if (e.deepspeed) plan.terms.push_back(deepspeed_term(*e.deepspeed, ranks));
  // Ray's term last, as under a raise it depends on every other one; listed after vLLM's.
  std::uint64_t others = 0;
  for (const EngineTerm& t : plan.terms) others = sat_add(others, t.bytes);
  if (e.ray)
    plan.terms.insert(plan.terms.begin() + (e.vllm ? 1 : 0),
                      ray_term(*e.ray, memory_limit, raise, others, ray_refusal));
  for (const EngineTerm& t : plan.terms) plan.bytes = sat_add(plan.bytes, t.bytes);
  plan.refusal = vllm_refusal ? vllm_refusal : ray_refusal;
  if (plan.refusal) plan.refusal->profile = profile.name;
  return plan;
}

void explain_engines(std::ostringstream& out, const EnginesPlan& plan) {
  for (const EngineTerm& t : plan.terms) {
    std::string label = t.engine;
    if (label.size() < 12) label.resize(12, ' ');
    out << "  " << label << " = " << t.formula << " (not measured here)\n";
    out << "                 source: " << t.source << "\n";
  }
  if (plan.terms.size() > 1) {
    out << "  engines      =";
    for (std::size_t i = 0; i < plan.terms.size(); ++i)
      out << (i ? " +" : "") << " " << plan.terms[i].engine << " " << format_mib(plan.terms[i].bytes);
    out << " = " << format_mib(plan.bytes) << "\n";
  }
}

nlohmann::json engines_plan_to_json(const EnginesPlan& plan) {
  nlohmann::json terms = nlohmann::json::array();
  for (const EngineTerm& t : plan.terms) {
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [name, bytes] : t.parts) parts[name] = bytes;
    terms.push_back({{"engine", t.engine},
                     {"bytes", t.bytes},
                     {"parts", parts},
                     {"formula", t.formula},
                     {"source", t.source},
                     {"measured", false}});
  }
  return {{"bytes", plan.bytes}, {"terms", terms}};
}

}  // namespace gpurun
