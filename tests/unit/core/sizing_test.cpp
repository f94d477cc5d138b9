#include "decision/sizing.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

constexpr std::uint64_t MiB = 1048576;
constexpr std::uint64_t GiB = 1073741824;

// ImageNet-like: 3x224x224 float32 image + int64 label, batch 64, auto workers,
// prefetch 2, pin_memory, headroom 1.25, nccl 1 GiB, shm in [256 MiB, 256 GiB].
// hold (batches beyond prefetch_factor * workers) is 0 with pin_memory on a GPU (gpus > 0:
// the pin thread copies each batch out of /dev/shm), else 2 (no pin thread: the loop's
// current and previous batch are still there). So with this profile gpus >= 1 -> hold 0,
// gpus 0 -> hold 2. Each loader adds its semaphore pages, 4096 x (8 + 5 x workers): 114,688 bytes
// with 4 workers (kSem4).
Profile imagenet_like() {
  Profile p;
  p.name = "test";
  p.fields = {{"image", {3, 224, 224}, "float32"}, {"label", {}, "int64"}};
  p.batch_size = 64;
  p.prefetch_factor = 2;
  p.pin_memory = true;
  p.headroom = 1.25;
  p.nccl_reserve = GiB;
  p.min_shm = 256 * MiB;
  p.max_shm = 256 * GiB;
  return p;
}

SizingRequest request(unsigned gpus, std::optional<std::uint64_t> workers, unsigned cpus = 8) {
  SizingRequest r;
  r.gpus = gpus;
  r.workers = workers;
  r.cpus = cpus;
  return r;
}

// Batch of 64 for imagenet_like():
//   image: 64 * 3*224*224 * 4 = 64 * 602112 = 38,535,168 = 9408 pages exactly
//   label: 64 * 8 = 512 -> one page, 4096
//   batch_bytes = 38,539,264
constexpr std::uint64_t kImage64 = 38535168;
constexpr std::uint64_t kBatch64 = 38539264;
constexpr std::uint64_t kSem4 = 4096 * (8 + 5 * 4);

TEST(PlanShm, OneGpuPinMemory) {
  ShmPlan p = plan_shm(imagenet_like(), request(1, 4));
  ASSERT_EQ(p.fields.size(), 2u);
  EXPECT_EQ(p.fields[0].name, "image");
  EXPECT_EQ(p.fields[0].bytes, kImage64);
  EXPECT_EQ(p.fields[1].bytes, 4096u);
  EXPECT_EQ(p.batch_bytes, kBatch64);
  EXPECT_EQ(p.ranks, 1u);
  EXPECT_EQ(p.workers, 4u);
  EXPECT_FALSE(p.workers_auto);
  EXPECT_EQ(p.hold, 0u);  // pin_memory on a GPU
  // per_rank = (2 * 4 + 0) * 38,539,264 + 114,688 = 308,314,112 + 114,688 = 308,428,800
  EXPECT_EQ(p.per_rank, 308428800u);
  EXPECT_EQ(p.loaders.front().sem_bytes, kSem4);
  EXPECT_EQ(p.nccl, 0u);  // a single rank reserves nothing for NCCL
  // need = 1.25 * 308,428,800 = 385,536,000, up to 64 KiB: 5,883 x 65,536 = 385,548,288;
  // shm up to whole MiB: 367 MiB = 384,827,392 < it <= 368 MiB = 385,875,968 -> 368 MiB
  EXPECT_EQ(p.need, 385548288u);
  EXPECT_EQ(p.shm, 368 * MiB);
  EXPECT_CONTAINS(explain(p), "shm          = 368MiB (the need rounded up to whole MiB)");
  EXPECT_CONTAINS(explain(p), "nccl) = 367.7MiB");
  EXPECT_TRUE(p.fits());
  EXPECT_NO_THROW(require_fits(p));
}

TEST(PlanShm, NoPinMemoryHoldsThree) {
  Profile prof = imagenet_like();
  prof.pin_memory = false;
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.hold, 3u);
  // per_rank = (2 * 4 + 3) * 38,539,264 + 114,688 = 424,046,592
  EXPECT_EQ(p.per_rank, 424046592u);
  // need = 1.25 * 424,046,592 = 530,058,240 = 505.50 MiB -> 506 MiB
  EXPECT_EQ(p.shm, 506 * MiB);
}

TEST(PlanShm, ZeroGpusIsOneRankWithoutPinThread) {
  // No GPU: one rank and no NCCL reserve like one GPU, but PyTorch starts no pin thread
  // without CUDA, so pin_memory does not help: hold 3, as in NoPinMemoryHoldsThree.
  ShmPlan zero = plan_shm(imagenet_like(), request(0, 4));
  ShmPlan one = plan_shm(imagenet_like(), request(1, 4));
  EXPECT_EQ(zero.gpus, 0u);
  EXPECT_EQ(zero.ranks, 1u);
  EXPECT_EQ(zero.nccl, 0u);
  EXPECT_EQ(zero.hold, 3u);
  // per_rank = (2 * 4 + 3) * 38,539,264 + 114,688 = 424,046,592; * 1.25 = 505.50 MiB -> 506 MiB
  EXPECT_EQ(zero.per_rank, 424046592u);
  EXPECT_EQ(zero.shm, 506 * MiB);
  EXPECT_EQ(one.shm, 368 * MiB);  // OneGpuPinMemory
}

TEST(PlanShm, HoldIsZeroOnlyWithPinMemoryOnAGpu) {
  // The rule for one loader: hold = (pin_memory && gpus > 0) ? 0 : 2, and without a pin thread one
  // batch more when the loader has no persistent_workers (the last batch of a pass, which the loop
  // variable holds while the next pass forks its workers, stays mapped in them).
  Profile pin = imagenet_like();  // pin_memory true
  Profile nopin = imagenet_like();
  nopin.pin_memory = false;

  // pin_memory true, 1 GPU: the pin thread copies batches out -> hold 0.
  ShmPlan pin1 = plan_shm(pin, request(1, 4));
  EXPECT_EQ(pin1.hold, 0u);
  // per_rank = (2 * 4 + 0) * 38,539,264 + 114,688 = 308,428,800
  EXPECT_EQ(pin1.per_rank, 308428800u);
  EXPECT_CONTAINS(explain(pin1), "(prefetch_factor 2 x workers 4 + hold 0)");
  EXPECT_EQ(plan_to_json(pin1)["hold"], 0u);

  // pin_memory true, 0 GPUs: PyTorch starts no pin thread without CUDA -> hold 2 + 1.
  ShmPlan pin0 = plan_shm(pin, request(0, 4));
  EXPECT_EQ(pin0.hold, 3u);
  // per_rank = (2 * 4 + 3) * 38,539,264 + 114,688 = 424,046,592
  EXPECT_EQ(pin0.per_rank, 424046592u);
  EXPECT_CONTAINS(explain(pin0), "(prefetch_factor 2 x workers 4 + hold 3)");
  EXPECT_EQ(plan_to_json(pin0)["hold"], 3u);

  // pin_memory false, 2 GPUs: no pin thread -> hold 3.
  ShmPlan nopin2 = plan_shm(nopin, request(2, 4));
  EXPECT_EQ(nopin2.hold, 3u);
  // per_rank = 424,046,592
  // need = 1.25 * (2 * 424,046,592 + 1,073,741,824) = 1.25 * 1,921,835,008 = 2,402,293,760
  //   2291 MiB = 2,402,287,616 < it <= 2292 MiB = 2,403,336,192 -> 2292 MiB
  EXPECT_EQ(nopin2.per_rank, 424046592u);
  EXPECT_EQ(nopin2.shm, 2292 * MiB);
  // With persistent_workers the workers are forked once, before the loop holds a batch: hold 2.
  Loader persistent;
  persistent.name = "train";
  persistent.persistent_workers = true;
  nopin.loaders = {persistent};
  EXPECT_EQ(plan_shm(nopin, request(2, 4)).hold, 2u);
  EXPECT_EQ(plan_shm(nopin, request(2, 4)).per_rank, 385507328u);  // (2 * 4 + 2) * 38,539,264 + 114,688
  nopin.loaders.clear();

  // pin_memory false with 0 GPUs is hold 3 as well, and so is the same profile at gpus 0
  // with and without pin_memory: the flag only matters on a GPU.
  EXPECT_EQ(plan_shm(nopin, request(0, 4)).hold, 3u);
  EXPECT_EQ(plan_shm(nopin, request(0, 4)).shm, pin0.shm);
}

TEST(LoaderHold, PinnedOnlyWhenAGpuReachesTheContainer) {
  // torch 1.13: `_pin_memory = loader.pin_memory and torch.cuda.is_available()`. No pin thread:
  // the loop's batch and the previous one stay in /dev/shm (2); a pin thread copies them out (0).
  EXPECT_EQ(loader_hold(false, 2, GpuReach::some).batches, 2u);
  EXPECT_EQ(loader_hold(true, 0, GpuReach::unknown).batches, 2u);
  EXPECT_EQ(loader_hold(true, 3, GpuReach::none, "--gpu-request none").batches, 2u);
  EXPECT_EQ(loader_hold(true, 3, GpuReach::some).batches, 0u);
  // A door that cannot tell: the GPUs asked for are assumed to reach the container, and says so.
  const LoaderHold unknown = loader_hold(true, 3, GpuReach::unknown);
  EXPECT_EQ(unknown.batches, 0u);
  EXPECT_CONTAINS(unknown.why, "3 GPU(s) requested, assumed to reach the container");
  EXPECT_CONTAINS(loader_hold(true, 3, GpuReach::none, "--gpu-request none").why, "(--gpu-request none)");
}

TEST(PlanShm, PinnedLoaderWithoutAGpuInTheContainerHoldsAsWithoutPinMemory) {
  // 3 ranks asked for, --gpu-request none: no GPU reaches the container, PyTorch does not pin.
  SizingRequest none = request(3, 4);
  none.gpu_reach = GpuReach::none;
  none.gpu_reach_why = "--gpu-request none";
  ShmPlan p = plan_shm(imagenet_like(), none);
  EXPECT_EQ(p.ranks, 3u);
  EXPECT_EQ(p.hold, 3u);
  // per_rank = (2 * 4 + 3) * 38,539,264 + 114,688 = 424,046,592 (HoldIsZeroOnlyWithPinMemoryOnAGpu)
  EXPECT_EQ(p.per_rank, 424046592u);
  EXPECT_EQ(plan_to_json(p)["hold_why"], p.hold_why);
  EXPECT_CONTAINS(explain(p), "hold 3: pin_memory, but no GPU reaches the container (--gpu-request none)");
  // The same request where the door cannot tell keeps the pin thread's hold, and --explain says
  // which hold it assumed and why.
  ShmPlan unknown = plan_shm(imagenet_like(), request(3, 4));
  EXPECT_EQ(unknown.hold, 0u);
  EXPECT_EQ(unknown.per_rank, 308428800u);  // OneGpuPinMemory
  EXPECT_CONTAINS(explain(unknown), "hold 0: pin_memory with 3 GPU(s) requested, assumed to reach the container");
}

TEST(PlanShm, TwoRanksAddNcclReserve) {
  ShmPlan p = plan_shm(imagenet_like(), request(2, 4));
  EXPECT_EQ(p.ranks, 2u);
  EXPECT_EQ(p.nccl, GiB);
  // hold 0: per_rank 308,428,800 (OneGpuPinMemory); nccl_reserve is flat, as before the nccl section
  // 2 * 308,428,800 + 1,073,741,824 = 616,857,600 + 1,073,741,824 = 1,690,599,424
  // * 1.25 = 2,113,249,280 -> 32,246 x 64 KiB = 2,113,273,856;
  // 2015 MiB = 2,112,880,640 < it <= 2016 MiB = 2,113,929,216 -> shm 2016 MiB
  EXPECT_EQ(p.need, 2113273856u);
  EXPECT_EQ(p.shm, 2016 * MiB);
}

TEST(PlanShm, EightRanks) {
  ShmPlan p = plan_shm(imagenet_like(), request(8, 4));
  // 8 * 308,428,800 + 1 GiB = 2,467,430,400 + 1,073,741,824 = 3,541,172,224
  // * 1.25 = 4,426,465,280; 4221 MiB = 4,426,039,296 < it <= 4222 MiB = 4,427,087,872 -> 4222 MiB
  EXPECT_EQ(p.shm, 4222 * MiB);
}

TEST(PlanShm, MinShmClamp) {
  // MNIST-like: 1x28x28 float32 + int64 label, batch 64, 1 worker, min 128 MiB.
  Profile prof = imagenet_like();
  prof.fields = {{"image", {1, 28, 28}, "float32"}, {"label", {}, "int64"}};
  prof.min_shm = 128 * MiB;
  ShmPlan p = plan_shm(prof, request(1, 1));
  // image 64 * 784 * 4 = 200,704 = 49 pages; label one page -> batch 204,800
  EXPECT_EQ(p.batch_bytes, 204800u);
  // per_rank = (2 * 1 + 0) * 204,800 + 4096 * (8 + 5) = 409,600 + 53,248 = 462,848;
  // need = 1.25 * 462,848 = 578,560 -> 9 x 64 KiB = 589,824
  EXPECT_EQ(p.per_rank, 462848u);
  EXPECT_EQ(p.need, 589824u);
  EXPECT_EQ(p.shm, 128 * MiB);
  EXPECT_TRUE(p.fits());
  EXPECT_CONTAINS(explain(p), "raised to min_shm 128MiB");
}

TEST(PlanShm, ExplainAddsUpInOneUnit) {
  // Per rank above 1 GiB beside the need: both in MiB, not "1.3GiB" beside "5531.3MiB".
  Profile prof = imagenet_like();
  prof.max_shm = 256 * GiB;
  const ShmPlan p = plan_shm(prof, request(4, 16, 64));
  ASSERT_GT(p.per_rank, GiB);
  const std::string text = explain(p);
  for (const char* term : {"  per_rank     =", "  need         =", "  shm          =", "  batch_bytes  ="}) {
    const std::size_t at = text.find(term);
    ASSERT_NE(at, std::string::npos) << term;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_EQ(line.find("GiB"), std::string::npos) << line;
    EXPECT_CONTAINS(line, "MiB");
  }
}

TEST(PlanShm, AboveMaxShmIsAProblemNotAClamp) {
  Profile prof = imagenet_like();
  prof.max_shm = 256 * MiB;
  prof.min_shm = 64 * MiB;
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.need, 385548288u);  // OneGpuPinMemory
  EXPECT_EQ(p.shm, 368 * MiB);    // not silently cut to max_shm
  ASSERT_TRUE(p.refusal);
  EXPECT_EQ(p.refusal->kind, RefusalKind::kAboveMaxShm);
  EXPECT_EQ(p.refusal->size, p.need);
  EXPECT_EQ(p.refusal->max_shm, 256 * MiB);
  const std::string words = refusal_words(*p.refusal, kContainerWords);
  EXPECT_CONTAINS(words, "367.7MiB");
  EXPECT_CONTAINS(words, "max_shm 256MiB");
  EXPECT_CONTAINS(words, "lower workers or batch-size");
  EXPECT_CONTAINS(words, "(1 rank x 4 workers x batch");
  Profile tiny = prof;
  tiny.min_shm = MiB;
  tiny.max_shm = 16 * MiB;
  const ShmPlan one = plan_shm(tiny, request(1, 1));
  ASSERT_TRUE(one.refusal);
  EXPECT_CONTAINS(refusal_words(*one.refusal, kContainerWords), "(1 rank x 1 worker x batch") << "not \"1 workers\"";
  try {
    require_fits(p);
    FAIL() << "require_fits did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), words);
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
  EXPECT_CONTAINS(explain(p), "DOES NOT FIT");
}

TEST(PlanShm, MemoryLimitWithFraction) {
  SizingRequest r = request(1, 4);
  r.memory_limit = 512 * MiB;
  r.memory_fraction_max = 0.5;
  ShmPlan p = plan_shm(imagenet_like(), r);
  // shm 368 MiB (OneGpuPinMemory) > 0.5 * 512 MiB = 256 MiB. Enough memory would be
  // 368 / 0.5 = 736 MiB.
  EXPECT_EQ(p.shm, 368 * MiB);
  ASSERT_TRUE(p.refusal);
  EXPECT_EQ(p.refusal->kind, RefusalKind::kOverBudget);
  EXPECT_EQ(p.refusal->memory_limit, 512 * MiB);
  const std::string words = refusal_words(*p.refusal, kContainerWords);
  EXPECT_CONTAINS(words, "368MiB");
  EXPECT_CONTAINS(words, "memory limit 512MiB");
  EXPECT_CONTAINS(words, "50% = 256MiB");
  EXPECT_CONTAINS(words, "raise the memory limit to at least 736m");
  EXPECT_CONTAINS(words, "workers (now 4)");
  EXPECT_CONTAINS(words, "batch-size (now 64)");
  EXPECT_THROW(require_fits(p), Error);

  r.memory_limit = 1 * GiB;  // budget 512 MiB >= 368 MiB
  EXPECT_TRUE(plan_shm(imagenet_like(), r).fits());
  r.memory_limit = 736 * MiB;  // budget exactly 368 MiB: fits
  EXPECT_TRUE(plan_shm(imagenet_like(), r).fits());
  r.memory_limit = 736 * MiB - 2;  // budget one byte short
  EXPECT_FALSE(plan_shm(imagenet_like(), r).fits());

  r.memory_limit = 1 * GiB;
  r.memory_fraction_max = 0.25;  // budget 256 MiB
  ShmPlan q = plan_shm(imagenet_like(), r);
  ASSERT_TRUE(q.refusal);
  EXPECT_CONTAINS(refusal_words(*q.refusal, kContainerWords), "25% = 256MiB");
  // 368 MiB / 0.25 = 1472 MiB
  EXPECT_CONTAINS(refusal_words(*q.refusal, kContainerWords), "at least 1472m");
}

// At the profile's min_shm the job's keys cannot lower the size: the remedy names min_shm.
TEST(PlanShm, OverTheBudgetAtMinShmNamesMinShm) {
  SizingRequest r = request(1, 0);  // no workers: the plan is imagenet_like's min_shm, 256 MiB
  r.memory_limit = 384 * MiB;       // budget 192 MiB
  const ShmPlan p = plan_shm(imagenet_like(), r);
  ASSERT_TRUE(p.refusal);
  const std::string words = refusal_words(*p.refusal, kContainerWords);
  EXPECT_CONTAINS(words, "raise the memory limit to at least 512m, or lower min_shm in profile");
  EXPECT_CONTAINS(words, "(the plan sits at it; the job's terms need");
  EXPECT_EQ(words.find("lower workers"), std::string::npos) << words;
}

TEST(PlanShm, WorkersZeroPutsNothingPerRank) {
  ShmPlan p = plan_shm(imagenet_like(), request(1, 0));
  EXPECT_EQ(p.workers, 0u);
  EXPECT_EQ(p.per_rank, 0u);
  EXPECT_EQ(p.need, 0u);
  EXPECT_EQ(p.shm, 256 * MiB);  // min_shm
  EXPECT_CONTAINS(explain(p), "workers=0");
  // Two ranks with no workers still reserve NCCL's share: 1.25 * 1 GiB = 1280 MiB.
  ShmPlan two = plan_shm(imagenet_like(), request(2, 0));
  EXPECT_EQ(two.per_rank, 0u);
  EXPECT_EQ(two.shm, 1280 * MiB);
}

TEST(RecommendWorkers, CpusPerRankBoundedByBatch) {
  EXPECT_EQ(recommend_workers(16, 1, 64), 12u);  // min(16, 64/8 + 4 = 12)
  EXPECT_EQ(recommend_workers(16, 2, 64), 8u);   // min(16/2 = 8, 12)
  EXPECT_EQ(recommend_workers(16, 3, 64), 5u);   // 16/3 = 5
  EXPECT_EQ(recommend_workers(1, 4, 64), 1u);    // max(1, 1/4 = 0)
  EXPECT_EQ(recommend_workers(0, 1, 64), 1u);
  EXPECT_EQ(recommend_workers(64, 1, 2), 4u);     // 2/8 + 4 = 4
  EXPECT_EQ(recommend_workers(64, 1, 128), 20u);  // 128/8 + 4 = 20
  EXPECT_EQ(recommend_workers(8, 0, 64), 8u);     // 0 ranks counts as 1
}

TEST(PlanShm, AutoWorkers) {
  // Profile workers "auto", 16 CPUs, 2 GPUs: min(16/2 = 8, 64/8 + 4 = 12) = 8 per rank.
  ShmPlan p = plan_shm(imagenet_like(), request(2, std::nullopt, 16));
  EXPECT_TRUE(p.workers_auto);
  EXPECT_EQ(p.workers, 8u);
  EXPECT_EQ(p.cpus, 16u);
  // per_rank = (2 * 8 + 0) * 38,539,264 + 4096 * (8 + 40) = 616,628,224 + 196,608 = 616,824,832
  EXPECT_EQ(p.per_rank, 616824832u);
  // 2 * 616,824,832 + 1 GiB = 1,233,649,664 + 1,073,741,824 = 2,307,391,488
  // * 1.25 = 2,884,239,360; 2750 MiB = 2,883,584,000 < it <= 2751 MiB = 2,884,632,576 -> 2751 MiB
  EXPECT_EQ(p.shm, 2751 * MiB);
  EXPECT_CONTAINS(explain(p), "auto: 16 CPUs / 2 ranks");
}

TEST(PlanShm, WorkersPrecedence) {
  Profile prof = imagenet_like();
  prof.workers_per_gpu = 3;
  ShmPlan fixed = plan_shm(prof, request(1, std::nullopt, 64));
  EXPECT_EQ(fixed.workers, 3u);
  EXPECT_FALSE(fixed.workers_auto);
  ShmPlan asked = plan_shm(prof, request(1, 6, 64));
  EXPECT_EQ(asked.workers, 6u);
  EXPECT_FALSE(asked.workers_auto);
}

TEST(PlanShm, RequestOverridesBatchAndPrefetch) {
  SizingRequest r = request(1, 2);
  r.batch_size = 32;
  r.prefetch_factor = 4;
  ShmPlan p = plan_shm(imagenet_like(), r);
  EXPECT_EQ(p.batch_size, 32u);
  EXPECT_EQ(p.prefetch_factor, 4u);
  // image 32 * 602,112 = 19,267,584 (4704 pages); label 256 -> 4096; batch 19,271,680
  EXPECT_EQ(p.batch_bytes, 19271680u);
  // per_rank = (4 * 2 + 0) * 19,271,680 + 4096 * (8 + 10) = 154,173,440 + 73,728 = 154,247,168
  // * 1.25 = 192,808,960 -> 2,943 x 64 KiB = 192,872,448 (183.9 MiB), below min_shm
  EXPECT_EQ(p.per_rank, 154247168u);
  EXPECT_EQ(p.need, 192872448u);
  EXPECT_EQ(p.shm, 256 * MiB);
}

TEST(PlanShm, SampleBytesProfile) {
  Profile prof = imagenet_like();
  prof.fields.clear();
  prof.sample_bytes = 1000;
  prof.batch_size = 10;
  prof.min_shm = 0;
  ShmPlan p = plan_shm(prof, request(1, 1));
  // 10 * 1000 = 10,000 -> 3 pages = 12,288
  ASSERT_EQ(p.fields.size(), 1u);
  EXPECT_EQ(p.fields[0].name, "sample");
  EXPECT_EQ(p.batch_bytes, 12288u);
  // (2 * 1 + 0) * 12,288 = 24,576; * 1.25 = 30,720 -> 1 MiB
  EXPECT_EQ(p.shm, 1 * MiB);
}

TEST(PlanShm, CalibrationScalesPerSample) {
  Profile prof = imagenet_like();
  prof.min_shm = 0;
  Calibration c;
  c.peak_shm = 400 * MiB;  // 419,430,400 bytes
  c.workers = 4;
  c.batch_size = 64;
  c.gpus = 1;
  c.prefetch_factor = 2;
  c.pin_memory = true;
  prof.calibration = c;
  SizingRequest r = request(1, 2);
  r.batch_size = 32;
  ShmPlan p = plan_shm(prof, r);
  EXPECT_TRUE(p.calibrated);
  EXPECT_TRUE(p.fields.empty());
  // Measured with pin_memory on 1 GPU (hold 0): 1 rank * (2 * 4 + 0) = 8 batches of 64.
  // Per batch of 32: 419,430,400 * 32 / (8 * 64) = 419,430,400 / 16 = 26,214,400 (25 MiB),
  // already page-aligned (6400 pages)
  EXPECT_EQ(p.batch_bytes, 26214400u);
  // per_rank = (2 * 2 + 0) * 26,214,400 = 104,857,600 (100 MiB); * 1.25 = 125 MiB exactly
  EXPECT_EQ(p.per_rank, 104857600u);
  EXPECT_EQ(p.shm, 125 * MiB);
  EXPECT_CONTAINS(explain(p), "calibration");
}

TEST(PlanShm, CalibrationAtItsOwnConditionsReproducesThePeak) {
  Profile prof = imagenet_like();
  prof.min_shm = 0;
  Calibration c;
  c.peak_shm = 440 * MiB;
  c.workers = 4;
  c.batch_size = 64;
  c.gpus = 2;
  c.prefetch_factor = 2;
  c.pin_memory = false;
  prof.calibration = c;
  prof.pin_memory = false;
  ShmPlan p = plan_shm(prof, request(2, 4));
  // Measured over 2 ranks * (2 * 4 + 3) = 22 batches: 20,971,520 each, already page-aligned.
  EXPECT_EQ(p.batch_bytes, 20971520u);
  EXPECT_EQ(p.ranks * p.per_rank, 440 * MiB);
}

TEST(PlanShm, CalibrationDividesByTheSameHoldAsThePlan) {
  // pin_memory calibrations: hold 0 when measured on a GPU, 3 when measured without one.
  Profile prof = imagenet_like();  // pin_memory true
  prof.min_shm = 0;
  Calibration c;
  c.peak_shm = 440 * MiB;  // 461,373,440
  c.workers = 4;
  c.batch_size = 64;
  c.prefetch_factor = 2;
  c.pin_memory = true;

  c.gpus = 1;
  prof.calibration = c;
  ShmPlan on_gpu = plan_shm(prof, request(1, 4));
  // 1 rank * (2 * 4 + 0) = 8 batches: 461,373,440 / 8 = 57,671,680 (55 MiB) each
  EXPECT_EQ(on_gpu.batch_bytes, 57671680u);
  // at the same conditions: (2 * 4 + 0) * 55 MiB = 440 MiB, the measured peak
  EXPECT_EQ(on_gpu.per_rank, 440 * MiB);

  c.gpus = 0;
  prof.calibration = c;
  ShmPlan on_cpu = plan_shm(prof, request(0, 4));
  // no pin thread without a GPU: 1 rank * (2 * 4 + 3) = 11 batches: 41,943,040 (40 MiB) each
  EXPECT_EQ(on_cpu.batch_bytes, 41943040u);
  // at the same conditions: (2 * 4 + 3) * 40 MiB = 440 MiB, the measured peak
  EXPECT_EQ(on_cpu.per_rank, 440 * MiB);
}

TEST(PlanShm, SaturatesInsteadOfOverflowing) {
  Profile prof = imagenet_like();
  prof.fields = {{"huge", {1u << 30, 1u << 30}, "float64"}};
  prof.batch_size = 1u << 20;
  ShmPlan p = plan_shm(prof, request(8, 1024));
  EXPECT_EQ(p.need, std::numeric_limits<std::uint64_t>::max());
  EXPECT_FALSE(p.fits());
  EXPECT_THROW(require_fits(p), Error);
}

TEST(PlanShm, IsPure) {
  SizingRequest r = request(2, std::nullopt, 12);
  r.memory_limit = 64 * GiB;
  EXPECT_EQ(plan_to_json(plan_shm(imagenet_like(), r)), plan_to_json(plan_shm(imagenet_like(), r)));
}

TEST(PlanToJson, Keys) {
  SizingRequest r = request(1, 4);
  nlohmann::json j = plan_to_json(plan_shm(imagenet_like(), r));
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  const std::set<std::string> expected = {"profile",
                                          "gpus",
                                          "ranks",
                                          "workers",
                                          "workers_auto",
                                          "cpus",
                                          "batch_size",
                                          "prefetch_factor",
                                          "pin_memory",
                                          "hold",
                                          "hold_why",
                                          "fields",
                                          "calibrated",
                                          "batch_bytes",
                                          "per_rank_bytes",
                                          "nccl_bytes",
                                          "headroom",
                                          "need_bytes",
                                          "shm_bytes",
                                          "shm",
                                          "min_shm_bytes",
                                          "max_shm_bytes",
                                          "fits",
                                          "memory_limit_bytes",
                                          "loaders",
                                          "nccl",
                                          "engines",
                                          "per_rank_before_last_bytes",
                                          "per_rank_last_bytes"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(j["profile"], "test");
  EXPECT_EQ(j["shm"], "368m");  // OneGpuPinMemory
  EXPECT_EQ(j["shm_bytes"], 368 * MiB);
  EXPECT_EQ(j["batch_bytes"], kBatch64);
  EXPECT_EQ(j["per_rank_bytes"], 308428800u);
  ASSERT_EQ(j["loaders"].size(), 1u);
  EXPECT_EQ(j["loaders"][0]["semaphore_bytes"], kSem4);
  EXPECT_EQ(j["nccl"]["source"], "single rank");
  EXPECT_EQ(j["engines"]["bytes"], 0u);  // a profile that names no engine
  EXPECT_TRUE(j["engines"]["terms"].empty());
  EXPECT_EQ(j["hold"], 0u);
  EXPECT_EQ(j["fits"], true);
  EXPECT_TRUE(j["memory_limit_bytes"].is_null());
  ASSERT_EQ(j["fields"].size(), 2u);
  EXPECT_EQ(j["fields"][0]["name"], "image");
  EXPECT_EQ(j["fields"][0]["bytes"], kImage64);

  r.memory_limit = 512 * MiB;
  nlohmann::json bad = plan_to_json(plan_shm(imagenet_like(), r));
  EXPECT_EQ(bad["fits"], false);
  EXPECT_EQ(bad["memory_limit_bytes"], 512 * MiB);
  ASSERT_TRUE(bad.contains("problem"));
  EXPECT_CONTAINS(bad["problem"].get<std::string>(), "memory limit");
}

TEST(Explain, ShowsEveryTerm) {
  std::string e = explain(plan_shm(imagenet_like(), request(2, 4)));
  EXPECT_CONTAINS(e, "profile test: 2 ranks");
  EXPECT_CONTAINS(e, "image 36.8MiB");  // 38,535,168 / 1,048,576 = 36.75
  EXPECT_CONTAINS(e, "(prefetch_factor 2 x workers 4 + hold 0)");
  EXPECT_CONTAINS(e, "nccl_reserve = 1024MiB");
  EXPECT_CONTAINS(e, "shm          = 2016MiB (the need rounded up to whole MiB)");  // TwoRanksAddNcclReserve
  EXPECT_EQ(e.find("DOES NOT FIT"), std::string::npos);
}

// NCCL's SHM transport: one receive segment of sizeof(ncclRecvMem) = 4096 plus the LL (524,288),
// LL128 (4,915,200) and Simple (4,194,304) buffers = 9,637,888 bytes, the size NCCL reports in
// "Error while creating shared memory segment /dev/shm/nccl-... (size 9637888)".
TEST(NcclTerm, DefaultSegmentIsTheSizeNcclReports) {
  EXPECT_EQ(nccl_recv_segment(NcclSpec{}), 9637888u);
  NcclSpec small;
  small.buffsize = 1 << 20;  // NCCL_BUFFSIZE=1048576 (e.g. its ARM default)
  EXPECT_EQ(nccl_recv_segment(small), 4096u + 524288 + 4915200 + 1048576);
  small.ll128_buffsize = 1;  // page-rounded: 4096 + 524,288 + 1 + 1,048,576 -> 1,576,961 -> 1,581,056
  EXPECT_EQ(nccl_recv_segment(small), 1581056u);
}

TEST(NcclTerm, ShmTransportCountsRanksChannelsAndPeers) {
  Profile prof = imagenet_like();
  prof.nccl = NcclSpec{};                          // shm, 2 channels
  constexpr std::uint64_t kPair = 9637888 + 4096;  // receive + send segment
  EXPECT_EQ(plan_nccl(prof, 1).bytes, 0u);
  EXPECT_EQ(plan_nccl(prof, 1).source, "single rank");
  // 2 ranks: the ring's predecessor and the tree's other end are the same peer.
  NcclPlan two = plan_nccl(prof, 2);
  EXPECT_EQ(two.source, "nccl");
  EXPECT_EQ(two.peers, 1u);
  EXPECT_EQ(two.bytes, 2 * 2 * 1 * kPair);  // 38,567,936
  // 4 and 8 ranks: two peers per channel.
  EXPECT_EQ(plan_nccl(prof, 4).bytes, 4 * 2 * 2 * kPair);  // 154,271,744 = 147.1 MiB
  EXPECT_EQ(plan_nccl(prof, 8).bytes, 8 * 2 * 2 * kPair);
  prof.nccl->channels = 4;
  EXPECT_EQ(plan_nccl(prof, 8).bytes, 8 * 4 * 2 * kPair);
  // p2p and none put no segment per peer on /dev/shm.
  prof.nccl->transport = "p2p";
  EXPECT_EQ(plan_nccl(prof, 8).bytes, 0u);
  prof.nccl->transport = "none";
  EXPECT_EQ(plan_nccl(prof, 8).bytes, 0u);
  // A measured figure is used as it is.
  prof.nccl->measured = 40 * MiB;
  EXPECT_EQ(plan_nccl(prof, 8).bytes, 40 * MiB);
  EXPECT_EQ(plan_nccl(prof, 8).source, "measured");
  EXPECT_EQ(plan_nccl(prof, 1).bytes, 0u);
}

TEST(NcclTerm, AMeasurementWithItsRanksScalesByConnections) {
  Profile prof = imagenet_like();
  prof.nccl = NcclSpec{};
  // Measured with 2 ranks (2 x 1 connection a channel): 20 MiB. With 4 ranks, 4 x 2 = 8
  // connections: 4x; with 8 ranks 16 / 2 = 8x; at 2 ranks as measured.
  prof.nccl->measured = 20 * MiB;
  prof.nccl->measured_ranks = 2;
  EXPECT_EQ(plan_nccl(prof, 2).bytes, 20 * MiB);
  EXPECT_EQ(plan_nccl(prof, 2).measured_ranks, 0u);
  EXPECT_EQ(plan_nccl(prof, 4).bytes, 80 * MiB);
  EXPECT_EQ(plan_nccl(prof, 4).measured_ranks, 2u);
  EXPECT_EQ(plan_nccl(prof, 8).bytes, 160 * MiB);
  EXPECT_EQ(plan_nccl(prof, 1).bytes, 0u);
  // Measured with 4 ranks (8 connections): 2 ranks have 2, a quarter, page-rounded.
  prof.nccl->measured = 10 * MiB + 1;
  prof.nccl->measured_ranks = 4;
  EXPECT_EQ(plan_nccl(prof, 2).bytes, 641u * 4096);  // ceil(2,621,440.25) page-rounded
  const std::string e = explain(plan_shm(prof, request(8, 4)));
  EXPECT_CONTAINS(
      e, "(measured with 4 ranks, the profile's nccl.measured, scaled to 8 ranks by ranks x peers 8 x 2 / 4 x 2)");
}

TEST(NcclTerm, FlatReserveWithoutTheSection) {
  Profile prof = imagenet_like();  // nccl_reserve 1 GiB, no section
  EXPECT_EQ(plan_nccl(prof, 2).bytes, GiB);
  EXPECT_EQ(plan_nccl(prof, 2).source, "nccl_reserve");
}

TEST(NcclTerm, PlanAndExplainShowTheTermAndItsSource) {
  Profile prof = imagenet_like();
  prof.headroom = 1.0;
  prof.nccl = NcclSpec{};
  ShmPlan p = plan_shm(prof, request(2, 4));
  EXPECT_EQ(p.nccl, 38567936u);
  // 2 * 308,428,800 + 38,567,936 = 655,425,536 -> 626 MiB (625.06)
  EXPECT_EQ(p.shm, 626 * MiB);
  const std::string e = explain(p);
  EXPECT_CONTAINS(e, "nccl         = ranks 2 x channels 2 x peers 1 x (recv 9.2MiB + send 4KiB) = 36.8MiB");
  EXPECT_CONTAINS(e, "transport shm");
  EXPECT_CONTAINS(e, "src/transport/shm.cc");
  nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["nccl"]["source"], "nccl");
  EXPECT_EQ(j["nccl"]["recv_segment_bytes"], 9637888u);
  EXPECT_EQ(j["nccl_bytes"], 38567936u);
  prof.nccl->transport = "p2p";
  EXPECT_CONTAINS(explain(plan_shm(prof, request(2, 4))), "nccl         = 0 (transport p2p");
  prof.nccl->measured = 50 * MiB;
  EXPECT_CONTAINS(explain(plan_shm(prof, request(2, 4))), "nccl         = 50MiB (measured");
}

// Train + validation: both loaders hold their prefetched batches at once.
Profile train_and_val() {
  Profile prof = imagenet_like();
  prof.headroom = 1.0;
  prof.pin_memory = false;
  Loader train;
  train.name = "train";
  Loader val;
  val.name = "val";
  val.batch_size = 128;  // bigger than train's 64
  val.workers = 2;
  val.prefetch_factor = 4;
  val.persistent_workers = true;
  prof.loaders = {train, val};
  return prof;
}

TEST(Loaders, EveryLoaderAddsItsBoundAndWhatItsWorkersInherit) {
  ShmPlan p = plan_shm(train_and_val(), request(1, 4));
  ASSERT_EQ(p.loaders.size(), 2u);
  // Neither loader has a pin thread. train (the first loader, no persistent_workers): the loop's
  // batch and the previous one (2), its last batch of an epoch kept by the next epoch's workers (1),
  // and, when val's persistent workers start mid-epoch, the loop's two batches and the up to
  // 2 * 4 - 1 = 7 received out of order that its iterator holds (9): hold 12. The request's 4
  // workers, the profile's batch 64 and prefetch 2:
  //   (2 * 4 + 12) * 38,539,264 + 114,688 = 770,785,280 + 114,688 = 770,899,968
  EXPECT_EQ(p.loaders[0].name, "train");
  EXPECT_EQ(p.loaders[0].workers, 4u);
  EXPECT_EQ(p.loaders[0].hold, 12u);
  EXPECT_EQ(p.loaders[0].bytes, 770899968u);
  // val: batch 128 -> 77,070,336 (18,816 pages) + 4096 = 77,074,432; 2 workers, prefetch 4,
  // persistent (no batch of its own kept across passes, and its iterator alive between passes):
  // when train's workers start at each epoch, one batch of the loop and up to 4 * 2 - 1 = 7
  // received out of order: hold 2 + 8 = 10.
  //   (4 * 2 + 10) * 77,074,432 + 4096 * (8 + 10) = 1,387,339,776 + 73,728 = 1,387,413,504
  EXPECT_EQ(p.loaders[1].batch_bytes, 77074432u);
  EXPECT_EQ(p.loaders[1].workers, 2u);
  EXPECT_EQ(p.loaders[1].prefetch_factor, 4u);
  EXPECT_TRUE(p.loaders[1].persistent_workers);
  EXPECT_EQ(p.loaders[1].hold, 10u);
  EXPECT_EQ(p.loaders[1].bytes, 1387413504u);
  // per_rank = 770,899,968 + 1,387,413,504 = 2,158,313,472 -> 2059 MiB (2058.33)
  EXPECT_EQ(p.per_rank, 2158313472u);
  EXPECT_EQ(p.shm, 2059 * MiB);
  // The plan's single-loader view is the first loader's.
  EXPECT_EQ(p.workers, 4u);
  EXPECT_EQ(p.batch_bytes, kBatch64);
  const std::string e = explain(p);
  EXPECT_CONTAINS(e, "loader train: batch_size 64, workers 4");
  EXPECT_CONTAINS(e,
                  "loader val: batch_size 128, workers 2, prefetch_factor 4, pin_memory false, "
                  "persistent_workers true");
  EXPECT_CONTAINS(e, "(every loader alive at once)");
  EXPECT_CONTAINS(e,
                  "+9: the loop's 2 batches and the 7 received out of order when the workers of val start stay "
                  "mapped in them");
  EXPECT_CONTAINS(e,
                  "+8: the loop's 1 batch and the 7 received out of order when the workers of train start stay "
                  "mapped in them");
  EXPECT_CONTAINS(e, "+1: without persistent_workers each pass starts new workers");
  nlohmann::json j = plan_to_json(p);
  ASSERT_EQ(j["loaders"].size(), 2u);
  EXPECT_EQ(j["loaders"][1]["bytes"], 1387413504u);
  EXPECT_EQ(j["loaders"][1]["hold"], 10u);
  EXPECT_FALSE(j.contains("advancing_bytes"));
}

// One loader: the loop's two batches, and without persistent_workers the last batch of an epoch,
// which the loop variable still holds when the next epoch's workers are forked.
TEST(Loaders, OneLoaderKeepsItsLastBatchOfAPassUnlessPersistent) {
  Profile prof = train_and_val();
  prof.loaders.pop_back();
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[0].hold, 3u);
  EXPECT_EQ(p.per_rank, 424046592u);  // (2 * 4 + 3) * 38,539,264 + 114,688
  prof.loaders[0].persistent_workers = true;
  p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[0].hold, 2u);
  EXPECT_EQ(p.per_rank, 385507328u);  // (2 * 4 + 2) * 38,539,264 + 114,688
  // With a pin thread the loop never holds a batch in /dev/shm: nothing to keep.
  prof.loaders[0].persistent_workers = false;
  prof.loaders[0].pin_memory = true;
  p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[0].hold, 0u);
  EXPECT_EQ(p.per_rank, 308428800u);  // 2 * 4 * 38,539,264 + 114,688
}

// A pinned training loader next to an unpinned validation loader: the training loop holds no batch in
// /dev/shm; when val's persistent workers start they keep the batch train's pin thread is copying, and
// train's workers, started every epoch, keep val's last batch and what val's iterator holds.
TEST(Loaders, APinThreadsBatchIsKeptByOtherLoadersWorkers) {
  Profile prof = train_and_val();
  prof.pin_memory = true;
  prof.loaders[1].pin_memory = false;
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[0].hold, 1u);
  EXPECT_EQ(p.loaders[1].hold, 10u);
  // train (2 * 4 + 1) * 38,539,264 + 114,688 = 346,968,064; val 1,387,413,504 as above
  EXPECT_EQ(p.per_rank, 346968064u + 1387413504u);
  EXPECT_CONTAINS(explain(p), "+1: the batch its pin thread copies when the workers of val start");
}

// Workers of a loader that neither persists nor is the training loop live for one pass inside a
// training step: they keep nothing the loop has not kept anyway.
TEST(Loaders, ShortLivedWorkersOfAnotherLoaderKeepNothing) {
  Profile prof = train_and_val();
  prof.loaders[1].persistent_workers = false;
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[0].hold, 3u);  // 2 + its own last batch; val's workers keep nothing of it
  // 2 + its own last batch + the loop's one kept by train's workers; its iterator is gone between
  // passes, so nothing of it waits out of order when they start.
  EXPECT_EQ(p.loaders[1].hold, 4u);
}

// A training loader ordered first starts its workers before any other loader's batch exists and
// never again: they keep none of val's, and no epoch's workers keep the last epoch's batch.
TEST(Loaders, AFirstLoadersWorkersKeepNoneOfTheOthers) {
  Profile prof = train_and_val();
  prof.loaders[0].order = LoaderOrder::first;
  ShmPlan p = plan_shm(prof, request(1, 4));
  // train: 2 + the 9 val's persistent workers keep when they start mid-epoch (no +1): hold 11,
  //   (2 * 4 + 11) * 38,539,264 + 114,688 = 732,246,016 + 114,688 = 732,360,704
  EXPECT_EQ(p.loaders[0].hold, 11u);
  EXPECT_EQ(p.loaders[0].bytes, 732360704u);
  // val: only its own 2, (4 * 2 + 2) * 77,074,432 + 73,728 = 770,818,048
  EXPECT_EQ(p.loaders[1].hold, 2u);
  EXPECT_EQ(p.loaders[1].bytes, 770818048u);
  EXPECT_EQ(p.per_rank, 732360704u + 770818048u);
  const std::string e = explain(p);
  EXPECT_CONTAINS(e, "persistent_workers false, order first\n");
  EXPECT_CONTAINS(e, "ordered first: its workers start once");
  EXPECT_EQ(plan_to_json(p)["loaders"][0]["order"], "first");
}

// A test loader ordered last runs after the others' last pass: the plan is the larger of the
// others alive at once and what they leave (train's held batches, all of persistent val) beside it.
TEST(Loaders, ALastLoaderRunsBesideWhatTheOthersLeave) {
  Profile prof = train_and_val();
  Loader test;
  test.name = "test";
  test.batch_size = 256;
  test.workers = 2;
  test.order = LoaderOrder::last;
  prof.loaders.push_back(test);
  ShmPlan p = plan_shm(prof, request(1, 4));
  // train and val as in EveryLoaderAddsItsBoundAndWhatItsWorkersInherit: test's workers start after
  // theirs, and theirs never start after test's batches exist.
  EXPECT_EQ(p.loaders[0].bytes, 770899968u);
  EXPECT_EQ(p.loaders[1].bytes, 1387413504u);
  EXPECT_EQ(p.per_rank_before_last, 2158313472u);
  // test: batch 256 -> image 154,140,672 (37,632 pages) + label 4096 = 154,144,768; hold 2 (one pass,
  // no other loader's workers after it): (2 * 2 + 2) * 154,144,768 + 73,728 = 924,942,336
  EXPECT_EQ(p.loaders[2].hold, 2u);
  EXPECT_EQ(p.loaders[2].bytes, 924942336u);
  // Residues: train's workers are gone, its 12 held batches stay: 12 * 38,539,264 + 114,688 =
  // 462,585,856; val's persistent workers keep all of it: 1,387,413,504.
  EXPECT_EQ(p.loaders[0].residue, 462585856u);
  EXPECT_EQ(p.loaders[1].residue, 1387413504u);
  EXPECT_EQ(p.per_rank_last, 462585856u + 1387413504u + 924942336u);
  EXPECT_EQ(p.per_rank, p.per_rank_last);
  const std::string e = explain(p);
  EXPECT_CONTAINS(e, "before last  = train 735.2MiB + val 1323.1MiB = 2058.3MiB");
  EXPECT_CONTAINS(e, "last         = train residue 441.2MiB + val residue 1323.1MiB + test 882.1MiB = 2646.4MiB");
  EXPECT_CONTAINS(e, "per_rank     = the larger = 2646.4MiB");
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["loaders"][2]["order"], "last");
  EXPECT_EQ(j["per_rank_last_bytes"], 2774941696u);
  // Counted in every order, test holds 2, its last pass's batch kept by its next pass's workers, and
  // one batch of the loop kept by train's and one by val's workers: hold 5, and the loaders add up.
  prof.loaders[2].order = LoaderOrder::any;
  p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[2].hold, 5u);
  EXPECT_EQ(p.per_rank, 2158313472u + 9 * 154144768u + 73728u);
  EXPECT_EQ(p.per_rank_last, 0u);
  // A small last loader: the phase before it is the larger.
  prof.loaders[2].order = LoaderOrder::last;
  prof.loaders[2].batch_size = 8;
  p = plan_shm(prof, request(1, 4));
  EXPECT_LT(p.per_rank_last, p.per_rank_before_last);
  EXPECT_EQ(p.per_rank, 2158313472u);
}

// A list collate sends each sample's tensors on their own: every field is page-rounded per sample.
TEST(Loaders, ListCollatePageRoundsEachSample) {
  Profile prof = imagenet_like();
  prof.collate = Collate::list;
  ShmPlan p = plan_shm(prof, request(1, 1));
  // image: 64 x 602,112 (147 pages exactly) = 38,535,168; label: 64 x one page = 262,144
  ASSERT_EQ(p.fields.size(), 2u);
  EXPECT_EQ(p.fields[0].bytes, kImage64);
  EXPECT_EQ(p.fields[1].bytes, 64u * 4096);
  EXPECT_EQ(p.batch_bytes, kImage64 + 64u * 4096);
  EXPECT_EQ(plan_to_json(p)["loaders"][0]["collate"], "list");
  // A loader's own collate wins over the profile's.
  Loader l;
  l.name = "train";
  l.collate = Collate::stack;
  prof.loaders = {l};
  EXPECT_EQ(plan_shm(prof, request(1, 1)).batch_bytes, kBatch64);
}

TEST(Loaders, RequestSetsOnlyTheFirstLoader) {
  SizingRequest r = request(1, 1);
  r.batch_size = 32;
  r.prefetch_factor = 3;
  ShmPlan p = plan_shm(train_and_val(), r);
  EXPECT_EQ(p.loaders[0].batch_size, 32u);
  EXPECT_EQ(p.loaders[0].prefetch_factor, 3u);
  EXPECT_EQ(p.loaders[0].workers, 1u);
  EXPECT_EQ(p.loaders[1].batch_size, 128u);
  EXPECT_EQ(p.loaders[1].prefetch_factor, 4u);
  EXPECT_EQ(p.loaders[1].workers, 2u);
}

TEST(Loaders, OwnSamplesAutoWorkersAndPinThread) {
  Profile prof = train_and_val();
  prof.pin_memory = true;
  prof.loaders[1].fields = {{"clip", {3, 8, 64, 64}, "uint8"}};
  prof.loaders[1].workers.reset();
  prof.loaders[1].workers_auto = true;
  ShmPlan p = plan_shm(prof, request(2, 2, 16));
  // val: 128 * 3*8*64*64 = 12,582,912 bytes (3072 pages); auto workers min(16/2, 128/8+4) = 8
  ASSERT_EQ(p.loaders[1].fields.size(), 1u);
  EXPECT_EQ(p.loaders[1].fields[0].name, "clip");
  EXPECT_EQ(p.loaders[1].batch_bytes, 12582912u);
  EXPECT_TRUE(p.loaders[1].workers_auto);
  EXPECT_EQ(p.loaders[1].workers, 8u);
  // pin_memory on a GPU; the training loader's workers keep the batch its pin thread copies.
  EXPECT_EQ(p.loaders[1].hold, 1u);
  EXPECT_EQ(p.loaders[1].bytes, (4 * 8 + 1) * 12582912u + 4096 * (8 + 40));
  // Two ranks: each holds both loaders' bounds; the flat nccl_reserve comes on top.
  EXPECT_EQ(p.per_rank, p.loaders[0].bytes + p.loaders[1].bytes);
  EXPECT_EQ(p.need, (2 * p.per_rank + GiB + 65535) / 65536 * 65536);
}

TEST(Loaders, NoWorkersNothingInShm) {
  Profile prof = train_and_val();
  prof.loaders[1].workers = 0;
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_EQ(p.loaders[1].bytes, 0u);
  EXPECT_EQ(p.loaders[1].sem_bytes, 0u);
  EXPECT_EQ(p.per_rank, p.loaders[0].bytes);
}

// A 400 MiB peak measured at 4 workers, a batch of 64, one GPU and prefetch 2, as calibrate writes it.
Calibration calibration_of_400mib() {
  Calibration c;
  c.peak_shm = 400 * MiB;
  c.workers = 4;
  c.batch_size = 64;
  c.gpus = 1;
  c.prefetch_factor = 2;
  return c;
}

TEST(PlanShm, CalibratedPlanKeepsHeadroomOfAtLeastOneQuarter) {
  Profile prof = imagenet_like();
  prof.headroom = 1.0;
  prof.calibration = calibration_of_400mib();
  ShmPlan p = plan_shm(prof, request(1, 4));
  EXPECT_TRUE(p.calibrated);
  EXPECT_EQ(p.headroom, 1.25);
  EXPECT_EQ(p.loaders.front().sem_bytes, 0u);  // the measured peak holds the semaphores
  EXPECT_EQ(p.need, 500 * MiB);                // 1.25 x the peak at its own conditions
  EXPECT_CONTAINS(explain(p), "calibrated: headroom at least 1.25");
  prof.calibration.reset();
  EXPECT_EQ(plan_shm(prof, request(1, 4)).headroom, 1.0);
}

// profiles learn's calibration keeps the peak plus its run's burst (one rise between two samples),
// within 1.15-1.25 of the peak; without a burst, 1.25 as before.
TEST(CalibratedHeadroom, IsThePeakPlusOneBurstWithinBounds) {
  Calibration c;
  c.peak_shm = 400 * MiB;
  EXPECT_EQ(calibrated_headroom(c), 1.25) << "no burst: calibrate's, or written before learn recorded one";
  c.burst_shm = 0;
  EXPECT_EQ(calibrated_headroom(c), 1.15) << "a run that never rose between two samples: the floor";
  c.burst_shm = 20 * MiB;  // 5% of the peak: many small batches
  EXPECT_EQ(calibrated_headroom(c), 1.15);
  c.burst_shm = 80 * MiB;  // 20%: 1.2
  EXPECT_DOUBLE_EQ(calibrated_headroom(c), 1.2);
  c.burst_shm = 200 * MiB;  // half the peak at once: capped
  EXPECT_EQ(calibrated_headroom(c), 1.25);
  c.burst_shm = 4000 * MiB;  // larger than the peak (a rise measured against a reading of 0)
  EXPECT_EQ(calibrated_headroom(c), 1.25);
  c.peak_shm = 0;
  EXPECT_EQ(calibrated_headroom(c), 1.25) << "no peak: nothing to scale a burst by";
}

TEST(PlanShm, ALearnedCalibrationPlansThePeakPlusItsBurst) {
  Profile prof = imagenet_like();
  prof.headroom = 1.0;
  Calibration c = calibration_of_400mib();
  c.burst_shm = 72 * MiB;  // 18% of the peak
  prof.calibration = c;
  SizingRequest guarded = request(1, 4);
  guarded.guarded = true;  // under a guard: the tight headroom (unguarded: the test below)
  ShmPlan p = plan_shm(prof, guarded);
  EXPECT_DOUBLE_EQ(p.headroom, 1.18);
  EXPECT_FALSE(p.guarded_headroom);
  EXPECT_GE(p.need, 472 * MiB);  // the peak + one burst at its own conditions, to 64 KiB
  EXPECT_LE(p.need, 472 * MiB + 65536);
  c.burst_shm = 4 * MiB;
  prof.calibration = c;
  p = plan_shm(prof, guarded);
  EXPECT_EQ(p.headroom, 1.15);
  EXPECT_GE(p.need, 460 * MiB) << "never below the peak x 1.15";
  EXPECT_LE(p.need, 460 * MiB + 65536);
  prof.headroom = 1.3;  // a profile's own headroom larger than the learned one wins
  EXPECT_EQ(plan_shm(prof, guarded).headroom, 1.3);
}

// Without a guard a learned plan keeps kUnguardedLearnedHeadroom over the peak, or the profile's
// own plan when that lies between (its model covered the peak); calibrate's (no burst) is as it was.
TEST(PlanShm, WithoutAGuardALearnedPlanKeepsTheWideHeadroom) {
  Profile prof = imagenet_like();
  prof.headroom = 1.0;
  Calibration c = calibration_of_400mib();
  c.burst_shm = 4 * MiB;
  const std::uint64_t model = plan_shm(prof, request(1, 4)).need;  // without the calibration
  c.peak_shm = model * 10 / 13;  // the model 1.3x the learned peak: between 1.15 and 1.55
  prof.calibration = c;
  ShmPlan p = plan_shm(prof, request(1, 4));
  ASSERT_TRUE(p.guarded_headroom);
  EXPECT_EQ(*p.guarded_headroom, 1.15);
  EXPECT_GT(p.headroom, 1.29);
  EXPECT_LT(p.headroom, 1.31);
  EXPECT_GE(p.need + 65536, model) << "the model between: its plan";
  EXPECT_LE(p.need, model + 65536);
  EXPECT_NE(explain(p).find("no guard runs here"), std::string::npos) << explain(p);
  prof.calibration->peak_shm = model / 4;  // a model far above the learned peak: the wide headroom, not more
  p = plan_shm(prof, request(1, 4));
  EXPECT_DOUBLE_EQ(p.headroom, kUnguardedLearnedHeadroom);
  prof.calibration->peak_shm = 4000 * MiB;  // the model below the learned peak: the wide headroom
  p = plan_shm(prof, request(1, 4));
  EXPECT_DOUBLE_EQ(p.headroom, kUnguardedLearnedHeadroom);
  prof.calibration->burst_shm.reset();  // calibrate's: no burst, the headroom it had
  EXPECT_EQ(plan_shm(prof, request(1, 4)).headroom, kCalibratedHeadroom);
}

}  // namespace
}  // namespace gpurun
