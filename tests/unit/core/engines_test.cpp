#include "decision/engines.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/units.hpp"
#include "decision/sizing.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace engines_test {

constexpr std::uint64_t MiB = 1048576;
constexpr std::uint64_t GiB = 1073741824;

// A serving profile: no DataLoader workers, no NCCL section beyond the flat 0, headroom 1, so a
// plan's need is the engines' sum rounded up to 64 KiB.
Profile serving() {
  Profile p;
  p.name = "serving";
  p.sample_bytes = 1;
  p.batch_size = 1;
  p.workers_per_gpu = 0;
  p.prefetch_factor = 2;
  p.headroom = 1.0;
  p.min_shm = 0;
  p.max_shm = 1024 * GiB;
  return p;
}

SizingRequest gpus(unsigned n) {
  SizingRequest r;
  r.gpus = n;
  r.cpus = 8;
  return r;
}

const EngineTerm& term(const EnginesPlan& plan, const std::string& engine) {
  for (const EngineTerm& t : plan.terms)
    if (t.engine == engine) return t;
  throw std::runtime_error("no term " + engine);
}

std::uint64_t part(const EngineTerm& t, const std::string& name) {
  for (const auto& [n, bytes] : t.parts)
    if (n == name) return bytes;
  throw std::runtime_error("no part " + name);
}

// vLLM's ShmRingBuffer: (max_chunk_bytes + 1 + n_reader) x max_chunks bytes, page-rounded.
TEST(VllmTerm, RingBufferIsChunksPlusAFlagByteForTheWriterAndEachReader) {
  // The broadcast ring at TP 2 with the defaults: (16 MiB + 1 + 2) x 10 = 167,772,190 bytes, the
  // "160 MiB required" of vLLM's check; 40,961 pages = 167,776,256.
  EXPECT_EQ(vllm_ring_buffer_bytes(16 * MiB, 2, 10), 167776256u);
  // A worker's response ring, MessageQueue(1, 1): (24 MiB + 2) x 10 = 251,658,260 -> 61,441 pages
  // = 251,662,336 (vLLM's check: "240 MiB required").
  EXPECT_EQ(vllm_ring_buffer_bytes(24 * MiB, 1, 10), 251662336u);
  // The TP group's ring at TP 2: (4 MiB + 1 + 1) x 6 = 25,165,836 -> 6,145 pages = 25,169,920.
  EXPECT_EQ(vllm_ring_buffer_bytes(4 * MiB, 1, 6), 25169920u);
  // Page-exact: (4095 + 1 + 0) x 1 = 4096.
  EXPECT_EQ(vllm_ring_buffer_bytes(4095, 0, 1), 4096u);
}

TEST(VllmTerm, TensorParallelOverTheGpus) {
  Profile p = serving();
  p.engines.vllm = VllmSpec{};
  // TP 2: broadcast 167,776,256 + 2 x 251,662,336 + 1 TP group x 25,169,920 = 696,270,848.
  EnginesPlan two = plan_engines(p, 2, std::nullopt);
  ASSERT_EQ(two.terms.size(), 1u);
  EXPECT_EQ(two.bytes, 696270848u);
  const EngineTerm& t = term(two, "vllm");
  EXPECT_EQ(part(t, "broadcast_bytes"), 167776256u);
  EXPECT_EQ(part(t, "response_bytes"), 2 * 251662336u);
  EXPECT_EQ(part(t, "tp_group_bytes"), 25169920u);
  EXPECT_EQ(part(t, "pipeline_parallel_size"), 1u);
  EXPECT_FALSE(two.refusal);
  // TP 4: (16 MiB + 5) x 10 -> 40,961 pages, the same 167,776,256; 4 responses = 1,006,649,344;
  // (4 MiB + 4) x 6 = 25,165,848 -> 6,145 pages = 25,169,920. Sum 1,199,595,520.
  EXPECT_EQ(plan_engines(p, 4, std::nullopt).bytes, 1199595520u);
  // TP 8: 167,776,256 + 8 x 251,662,336 + 25,169,920 = 2,206,244,864.
  EXPECT_EQ(plan_engines(p, 8, std::nullopt).bytes, 2206244864u);
}

TEST(VllmTerm, OneGpuStartsNoQueue) {
  Profile p = serving();
  p.engines.vllm = VllmSpec{};
  EnginesPlan one = plan_engines(p, 1, std::nullopt);
  EXPECT_EQ(one.bytes, 0u);
  EXPECT_CONTAINS(term(one, "vllm").formula, "uni executor");
  // ranks 0 (--gpus 0) is one process too.
  EXPECT_EQ(plan_engines(p, 0, std::nullopt).bytes, 0u);
  // The KV offloading tier is a file of its own, with or without queues.
  p.engines.vllm->kv_offloading_size = 4 * GiB;
  EXPECT_EQ(plan_engines(p, 1, std::nullopt).bytes, 4 * GiB);
  EXPECT_EQ(plan_engines(p, 2, std::nullopt).bytes, 696270848u + 4 * GiB);
}

TEST(VllmTerm, PipelineParallelAndTheEnvironmentOverride) {
  Profile p = serving();
  p.engines.vllm = VllmSpec{};
  p.engines.vllm->tensor_parallel_size = 2;
  // 4 GPUs as TP 2 x PP 2: the broadcast ring has 4 readers ((16 MiB + 5) x 10 -> 167,776,256),
  // 4 response rings (1,006,649,344), and 2 TP groups of (4 MiB + 2) x 6 -> 25,169,920 each.
  EnginesPlan plan = plan_engines(p, 4, std::nullopt);
  EXPECT_EQ(part(term(plan, "vllm"), "pipeline_parallel_size"), 2u);
  EXPECT_EQ(plan.bytes, 167776256u + 1006649344u + 2 * 25169920u);
  // VLLM_MQ_MAX_CHUNK_BYTES_MB=1 shrinks the broadcast ring only: (1 MiB + 1 + 4) x 10 = 10,485,810
  // -> 2,561 pages = 10,489,856.
  p.engines.vllm->mq_max_chunk_bytes = MiB;
  EXPECT_EQ(plan_engines(p, 4, std::nullopt).bytes, 10489856u + 1006649344u + 2 * 25169920u);
  // TP 1 over 2 GPUs is pipeline parallel only: no TP group ring.
  p.engines.vllm->tensor_parallel_size = 1;
  p.engines.vllm->mq_max_chunk_bytes = 16 * MiB;
  EXPECT_EQ(plan_engines(p, 2, std::nullopt).bytes, 167776256u + 2 * 251662336u);
  // A tensor-parallel size that does not divide the GPUs cannot be sized.
  p.engines.vllm->tensor_parallel_size = 4;
  EnginesPlan bad = plan_engines(p, 2, std::nullopt);
  ASSERT_TRUE(bad.refusal);
  EXPECT_EQ(bad.refusal->kind, RefusalKind::kVllmTensorParallel);
  EXPECT_EQ(bad.refusal->tensor_parallel, 4u);
  EXPECT_EQ(bad.refusal->ranks, 2u);
  EXPECT_CONTAINS(refusal_words(*bad.refusal, kContainerWords),
                  "profile serving: vLLM's engines.vllm.tensor_parallel_size 4 does not divide the 2 GPU");
  EXPECT_CONTAINS(refusal_words(*bad.refusal, kContainerWords), "request a multiple of it with gpus");
}

TEST(RayTerm, DefaultIsAFractionOfTheMemoryLimitCapped) {
  Profile p = serving();
  p.engines.ray = RaySpec{};
  // int(32 GiB x 0.3) = 10,307,921,510, in plasma's 0.9 of the free /dev/shm: / 0.9 =
  // 11,453,246,122.2 -> 11,453,246,123 -> page-rounded 11,453,247,488.
  EnginesPlan plan = plan_engines(p, 1, 32 * GiB);
  EXPECT_EQ(part(term(plan, "ray"), "object_store_memory"), 10307921510u);
  EXPECT_EQ(plan.bytes, 11453247488u);
  // 1 TiB x 0.3 = 329,853,488,332 is above the 200,000,000,000 cap: / 0.9 = 222,222,222,222.2
  // -> 222,222,222,223 -> page-rounded 222,222,225,408.
  EXPECT_EQ(plan_engines(p, 1, 1024 * GiB).bytes, 222222225408u);
  // RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION=0.5: 16 GiB x 0.5 = 8 GiB; / 0.9 = 9,544,371,654.8
  // -> page-rounded 9,544,372,224.
  p.engines.ray->object_store_fraction = 0.5;
  EXPECT_EQ(plan_engines(p, 1, 16 * GiB).bytes, 9544372224u);
  // Without a memory limit the default cannot be known.
  EnginesPlan unknown = plan_engines(p, 1, std::nullopt);
  ASSERT_TRUE(unknown.refusal);
  EXPECT_EQ(unknown.refusal->kind, RefusalKind::kRayNoMemoryLimit);
  const std::string words = refusal_words(*unknown.refusal, kContainerWords);
  EXPECT_CONTAINS(words, "the plan has no memory limit to take it from: give the container a memory limit");
  EXPECT_CONTAINS(words, "engines.ray.object_store_memory");
}

// Ray's figures (python/ray/_private/resource_spec.py and services.py, plasma's store_runner.cc):
// the store is int(0.3 x the limit Ray reads); Python caps it at 0.95 of the free /dev/shm and
// plasma at 0.9. For a 64 GiB limit: not raised, the store is 19.2 GiB and needs /dev/shm >= L/3
// (21.33 GiB); raised by /dev/shm's own size (the webhook's raise policy, L' = L + S), Ray reads
// L' and needs S >= L/2 (32 GiB). A term that plans from L alone (19.2 GiB + 5%) holds neither.
TEST(RayTerm, HoldsAfterTheLimitIsRaisedByTheShmRayReads) {
  Profile p = serving();
  p.engines.ray = RaySpec{};
  const std::uint64_t limit = 64 * GiB;
  const double headroom = 1.05;
  auto holds = [](std::uint64_t read_limit, std::uint64_t shm) {
    const long double store = std::min<long double>(static_cast<long double>(read_limit) * 0.3L, 200e9L);
    return store <= 0.9L * static_cast<long double>(shm);
  };
  // Not raised: Ray reads L.
  const std::uint64_t fixed = plan_engines(p, 1, limit).bytes;
  EXPECT_GE(fixed, limit / 3);
  EXPECT_TRUE(holds(limit, fixed));
  // Raised: S = headroom x (others + T) and Ray reads L + S.
  for (const std::uint64_t others : {std::uint64_t{0}, 3 * GiB}) {
    const EnginesPlan raised = plan_engines(p, 1, std::nullopt, LimitRaise{limit, headroom, others});
    ASSERT_FALSE(raised.refusal);
    const auto shm = static_cast<std::uint64_t>(std::ceil(headroom * static_cast<double>(others + raised.bytes)));
    EXPECT_GE(shm, limit / 2) << others;
    EXPECT_TRUE(holds(limit + shm, raised.bytes)) << "the store's share of the raised limit fits plasma's 0.9";
    EXPECT_TRUE(holds(limit + shm, shm - others)) << "and fits the /dev/shm the others leave free";
    EXPECT_EQ(part(term(raised, "ray"), "memory_limit"), limit);
    // The term that planned from L alone is too small once L is raised by it.
    const auto naive = static_cast<std::uint64_t>(headroom * static_cast<double>(others + fixed));
    EXPECT_FALSE(holds(limit + naive, fixed)) << others;
  }
  // Over the cap, the cap's share: 200e9 / 0.9, page-rounded.
  EXPECT_EQ(plan_engines(p, 1, std::nullopt, LimitRaise{4096 * GiB, headroom, 0}).bytes, 222222225408u);
}

// A learned profile where no guard runs keeps the wide headroom (kUnguardedLearnedHeadroom), applied
// after the Ray term was solved for the webhook's raise at the tight one: the store Ray sizes from
// the limit raised by the larger /dev/shm still fits what the others leave free (0.3 of the growth
// against 0.9 of it).
TEST(RayTerm, HoldsUnderTheRaiseAtAnUnguardedLearnedHeadroom) {
  Profile p = serving();
  p.engines.ray = RaySpec{};
  p.workers_per_gpu = 2;
  Calibration c;
  c.peak_shm = 2 * GiB;
  c.burst_shm = 16 * 1024 * 1024;
  c.workers = 2;
  c.batch_size = 1;
  c.gpus = 1;
  c.prefetch_factor = 2;
  p.calibration = c;
  SizingRequest r = gpus(1);
  r.limit_raised_from = 64 * GiB;
  const ShmPlan plan = plan_shm(p, r);
  ASSERT_TRUE(plan.guarded_headroom) << "no guard: the wide headroom";
  ASSERT_GT(plan.headroom, *plan.guarded_headroom);
  const std::uint64_t others = plan.ranks * plan.per_rank + plan.nccl;
  const long double store = static_cast<long double>(64 * GiB + plan.shm) * 0.3L;
  EXPECT_LE(store, 0.9L * static_cast<long double>(plan.shm - others)) << "the store of the raised limit fits";
  EXPECT_EQ(part(term(plan.engines, "ray"), "memory_limit"), 64 * GiB);
}

TEST(RayTerm, AnExplicitSizeOrAPlasmaDirectoryElsewhere) {
  Profile p = serving();
  p.engines.ray = RaySpec{};
  p.engines.ray->object_store_memory = 2 * GiB + 1;  // page-rounded: 2 GiB + 4096
  EnginesPlan plan = plan_engines(p, 4, std::nullopt);
  EXPECT_FALSE(plan.refusal);
  EXPECT_EQ(plan.bytes, 2 * GiB + 4096);
  // The store in /tmp takes nothing of /dev/shm; a directory under /dev/shm still counts.
  p.engines.ray->plasma_directory = "/tmp/plasma";
  EXPECT_EQ(plan_engines(p, 4, std::nullopt).bytes, 0u);
  EXPECT_CONTAINS(term(plan_engines(p, 4, std::nullopt), "ray").formula, "not on /dev/shm");
  p.engines.ray->plasma_directory = "/dev/shm/ray";
  EXPECT_EQ(plan_engines(p, 4, std::nullopt).bytes, 2 * GiB + 4096);
  p.engines.ray->plasma_directory = "/dev/shmx";
  EXPECT_EQ(plan_engines(p, 4, std::nullopt).bytes, 0u);
}

TEST(TritonTerm, APoolPerInstanceGrownInGrowthSteps) {
  Profile p = serving();
  p.engines.triton_python = TritonPythonSpec{};
  // One instance at the defaults: a 1 MiB pool.
  EXPECT_EQ(plan_engines(p, 1, std::nullopt).bytes, MiB);
  // 4 instances holding 10 MiB of tensors each: GrowIfNeeded adds 1 MiB x (10 + 1) = 11 MiB to the
  // 1 MiB pool: 4 x 12 MiB = 48 MiB.
  p.engines.triton_python->instances = 4;
  p.engines.triton_python->inflight_bytes = 10 * MiB;
  EnginesPlan plan = plan_engines(p, 1, std::nullopt);
  EXPECT_EQ(plan.bytes, 48 * MiB);
  EXPECT_EQ(part(term(plan, "triton_python"), "pool_bytes"), 12 * MiB);
  // Before r23.09 the defaults were 64 MiB each: 64 MiB + 64 MiB x (0 + 1) = 128 MiB an instance.
  p.engines.triton_python->shm_default_byte_size = 64 * MiB;
  p.engines.triton_python->shm_growth_byte_size = 64 * MiB;
  EXPECT_EQ(plan_engines(p, 1, std::nullopt).bytes, 4 * 128 * MiB);
  // The ranks do not multiply it: one server, its instances.
  EXPECT_EQ(plan_engines(p, 8, std::nullopt).bytes, 4 * 128 * MiB);
}

TEST(DeepSpeedTerm, AWorkspacePerRank) {
  // sizeof(struct allreduce_workspace) = 2 x 4 (states) + 2 x 1 MiB + 2 x 32 MiB = 69,206,024
  // -> 16,897 pages = 69,210,112.
  EXPECT_EQ(deepspeed_workspace_bytes(), 69210112u);
  Profile p = serving();
  p.engines.deepspeed = DeepSpeedSpec{};
  EXPECT_EQ(plan_engines(p, 4, std::nullopt).bytes, 4 * 69210112u);
  EXPECT_EQ(plan_engines(p, 0, std::nullopt).bytes, 69210112u);  // one rank: still one workspace
  p.engines.deepspeed->ranks = 16;                               // CPU ranks: the plan has no GPU to count them by
  EXPECT_EQ(plan_engines(p, 0, std::nullopt).bytes, 16 * 69210112u);
}

TEST(EnginesInThePlan, AddedToTheNeedWithTheHeadroomAndExplained) {
  Profile p = serving();
  p.headroom = 1.05;
  p.nccl = NcclSpec{};
  p.engines.vllm = VllmSpec{};
  // vLLM TP 2: 696,270,848; NCCL 2 ranks: 2 x 2 x 1 x (9,637,888 + 4096) = 38,567,936.
  // 1.05 x 734,838,784 = 771,580,723.2 -> to 64 KiB 771,620,864 (735.875 MiB) -> 736 MiB.
  ShmPlan plan = plan_shm(p, gpus(2));
  EXPECT_EQ(plan.per_rank, 0u);
  EXPECT_EQ(plan.engines.bytes, 696270848u);
  EXPECT_EQ(plan.need, 771620864u);
  EXPECT_EQ(plan.shm, 736 * MiB);
  const std::string e = explain(plan);
  EXPECT_CONTAINS(e,
                  "  vllm         = broadcast (16MiB + 1 + 2) x 10 chunks 160MiB + 2 x response (24MiB + 2) x "
                  "10 chunks 240MiB + 1 x TP group (4MiB + 2) x 6 chunks 24MiB = 664MiB");
  EXPECT_CONTAINS(e, "(not measured here)");
  EXPECT_CONTAINS(e, "source: vLLM main at 9aaf83ef");
  EXPECT_CONTAINS(e, "shm_broadcast.py ShmRingBuffer");
  EXPECT_CONTAINS(e, "need         = headroom 1.05 x (2 x per_rank + nccl + engines) = 735.9MiB");
  // No DataLoader worker: no batch to show, and the DataLoader term says why it is 0.
  EXPECT_EQ(e.find("batch_bytes"), std::string::npos) << e;
  EXPECT_CONTAINS(e, "per_rank     = 0 (workers=0: no DataLoader worker, so no batch in /dev/shm)");
  const nlohmann::json j = plan_to_json(plan);
  EXPECT_EQ(j["engines"]["bytes"], 696270848u);
  ASSERT_EQ(j["engines"]["terms"].size(), 1u);
  EXPECT_EQ(j["engines"]["terms"][0]["engine"], "vllm");
  EXPECT_EQ(j["engines"]["terms"][0]["measured"], false);
  EXPECT_EQ(j["engines"]["terms"][0]["parts"]["response_bytes"], 503324672u);
  EXPECT_CONTAINS(j["engines"]["terms"][0]["source"].get<std::string>(), "multiproc_executor.py");
}

TEST(EnginesInThePlan, EveryEngineAtOnceAddsUp) {
  Profile p = serving();
  p.engines.vllm = VllmSpec{};
  p.engines.ray = RaySpec{};
  p.engines.ray->object_store_memory = GiB;
  p.engines.triton_python = TritonPythonSpec{};
  p.engines.deepspeed = DeepSpeedSpec{};
  // 696,270,848 + 1 GiB + 1 MiB + 2 x 69,210,112 = 1,909,481,472 (1.78 GiB) -> to 64 KiB
  // (29,136.4 of them) 29,137 x 65,536 = 1,909,522,432.
  ShmPlan plan = plan_shm(p, gpus(2));
  EXPECT_EQ(plan.engines.bytes, 1909481472u);
  EXPECT_EQ(plan.need, 1909522432u);
  const std::string e = explain(plan);
  EXPECT_CONTAINS(e, "  engines      = vllm 664MiB + ray 1024MiB + triton_python 1MiB + deepspeed 132MiB = 1821MiB");
  EXPECT_CONTAINS(e, "  ray          = object_store_memory 1024MiB, the profile's engines.ray (not measured here)");
  EXPECT_CONTAINS(e, "  triton_python = instances 1 x (shm-default-byte-size 1MiB) = 1MiB");
  EXPECT_CONTAINS(e, "  deepspeed    = ranks 2 x allreduce workspace");
  EXPECT_CONTAINS(e, "python_backend r26.07");
  EXPECT_CONTAINS(e, "DeepSpeed v0.19.5 csrc/cpu/comm/shm.cpp");
  EXPECT_CONTAINS(e, "ray_constants.py");
}

TEST(EnginesInThePlan, AnEngineThatCannotBeSizedIsTheProblem) {
  Profile p = serving();
  p.engines.ray = RaySpec{};
  ShmPlan plan = plan_shm(p, gpus(1));
  ASSERT_TRUE(plan.refusal);
  EXPECT_CONTAINS(refusal_words(*plan.refusal, kContainerWords),
                  "profile serving: Ray's object store defaults to 0.3 of the container's memory");
  EXPECT_CONTAINS(explain(plan), "DOES NOT FIT: profile serving: Ray's");
  EXPECT_THROW(require_fits(plan), Error);
  SizingRequest r = gpus(1);
  // int(0.3 x 16 GiB) = 5,153,960,755; / 0.9 -> page-rounded 5,726,625,792; budget 8 GiB holds it
  r.memory_limit = 16 * GiB;
  plan = plan_shm(p, r);
  EXPECT_TRUE(plan.fits());
  EXPECT_EQ(plan.engines.bytes, 5726625792u);
}

// NCCL's cuMem host mode: the SHM transport's buffers leave /dev/shm.
TEST(NcclCumem, HostMemCumemMakesTheTermZero) {
  Profile p = serving();
  p.nccl = NcclSpec{};
  EXPECT_EQ(plan_nccl(p, 4).bytes, 154271744u);  // 4 x 2 x 2 x 9,641,984
  p.nccl->host_mem = "cumem";
  NcclPlan n = plan_nccl(p, 4);
  EXPECT_EQ(n.bytes, 0u);
  EXPECT_EQ(n.host_mem, "cumem");
  const std::string e = explain(plan_shm(p, gpus(4)));
  EXPECT_CONTAINS(e, "nccl         = 0 (transport shm, host_mem cumem: NCCL_CUMEM_HOST_ENABLE");
  EXPECT_CONTAINS(e, "src/transport/shm.cc ncclShmAllocateShareableBuffer");
  EXPECT_EQ(plan_to_json(plan_shm(p, gpus(4)))["nccl"]["host_mem"], "cumem");
  // A measured figure is what was measured, whatever the mode.
  p.nccl->measured = 10 * MiB;
  EXPECT_EQ(plan_nccl(p, 4).bytes, 10 * MiB);
}

}  // namespace engines_test
}  // namespace gpurun
