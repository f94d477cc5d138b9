// The built-in profiles, loaded from the source tree through ProfileStore, sized by hand.
//
// Model (docs/ARCHITECTURE.md, "The sizing model"), worked below for each profile with cpus = 8
// so that "auto" workers are fixed:
//   batch_bytes = sum of pageup(batch * prod(shape) * dtype_size)      page = 4096
//   per_rank    = (prefetch * workers + hold) * batch_bytes + sem       sem = 4096 * (8 + 5 * workers)
//   hold        = (pin_memory && gpus > 0) ? 0 : 2                      all built-ins pin_memory,
//                 so gpus 0 -> hold 2 (no pin thread without CUDA), gpus 1 and 2 -> hold 0
//                 (the door cannot tell whether the GPUs reach the container: assumed)
//   nccl        = ranks > 1: ranks * channels * peers * (recv + send)   every built-in: transport shm,
//                 2 channels; 2 ranks -> 1 peer; recv 9,637,888, send 4096 -> 2*2*1*9,641,984 = 38,567,936
//   need        = roundup(headroom * (ranks * per_rank + nccl), 1 MiB)  headroom 1.05 (default.json)
//   shm         = max(need, min_shm)                                     ranks = max(gpus, 1)
// All built-ins use prefetch 2.

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "decision/config.hpp"
#include "decision/sizing.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_fixtures.hpp"

#ifndef GPU_RUN_SOURCE_PROFILES
#error "GPU_RUN_SOURCE_PROFILES must name the source tree's profiles/ directory"
#endif

namespace gpurun {
namespace {

constexpr std::uint64_t MiB = 1048576;
constexpr unsigned kCpus = 8;

constexpr std::uint64_t pageup(std::uint64_t n) { return (n + 4095) / 4096 * 4096; }

ProfileStore source_store() { return ProfileStore({fs::path(GPU_RUN_SOURCE_PROFILES)}); }

struct Expected {
  const char* name;
  std::uint64_t batch_bytes;
  std::uint64_t workers[3];  // for gpus 0, 1, 2
  std::uint64_t shm[3];      // for gpus 0, 1, 2
  const char* recipe;        // what the description must cite
};

// clang-format off
const Expected kExpected[] = {
    // default: batch 32, auto, min 256m. batch_bytes = 19,267,584 (4704 pages) + 4096 = 19,271,680
    //   gpus 0: W 8 hold 3; per_rank = 19 * 19,271,680 + 196,608 = 366,358,528; x 1.05 -> 367 MiB (366.85)
    //   gpus 1: W 8 hold 0; per_rank = 16 * 19,271,680 + 196,608 = 308,543,488; x 1.05 -> 309 MiB (308.96)
    //   gpus 2: W 4 hold 0; per_rank = 8 * 19,271,680 + 114,688 = 154,288,128;
    //           2 * 154,288,128 + 38,567,936 = 347,144,192; x 1.05 -> 348 MiB (347.62)
    {"default", pageup(32ull * 3 * 224 * 224 * 4) + pageup(32ull * 8), {8, 8, 4}, {367, 309, 348},
     "DataLoader defaults"},
    // imagenet: batch 64, auto, min 256m. batch_bytes = 38,535,168 (9408 pages) + 4096 = 38,539,264
    //   gpus 0: W 8 hold 3; per_rank = 19 * 38,539,264 + 196,608 = 732,442,624; x 1.05 -> 734 MiB (733.44)
    //   gpus 1: W 8 hold 0; per_rank = 16 * 38,539,264 + 196,608 = 616,824,832; x 1.05 -> 618 MiB (617.66)
    //   gpus 2: W 4 hold 0; per_rank = 8 * 38,539,264 + 114,688 = 308,428,800;
    //           2 * 308,428,800 + 38,567,936 = 655,425,536; x 1.05 -> 657 MiB (656.32)
    {"imagenet", pageup(64ull * 3 * 224 * 224 * 4) + pageup(64ull * 8), {8, 8, 4}, {734, 618, 657},
     "examples/imagenet"},
    // multi-gpu: imagenet with its nccl section and headroom restated: the same numbers.
    {"multi-gpu", pageup(64ull * 3 * 224 * 224 * 4) + pageup(64ull * 8), {8, 8, 4}, {734, 618, 657}, "NCCL"},
    // mnist: batch 64, 1 worker, min 128m. batch_bytes = 200,704 (49 pages) + 4096 = 204,800
    //   gpus 0: per_rank = 5 * 204,800 + 53,248 = 1,077,248; x 1.05 -> 2 MiB, raised to min_shm 128 MiB
    //   gpus 1: per_rank = 2 * 204,800 + 53,248 = 462,848 -> 1 MiB -> 128 MiB
    //   gpus 2: 2 * 462,848 + 38,567,936 = 39,493,632; x 1.05 -> 40 MiB -> 128 MiB
    {"mnist", pageup(64ull * 1 * 28 * 28 * 4) + pageup(64ull * 8), {1, 1, 1}, {128, 128, 128}, "examples/mnist"},
    // cifar: batch 128, 2 workers, min 128m. batch_bytes = 1,572,864 (384 pages) + 4096 = 1,576,960
    //   gpus 0: per_rank = 7 * 1,576,960 + 73,728 = 11,112,448; x 1.05 -> 12 MiB -> 128 MiB
    //   gpus 1: per_rank = 4 * 1,576,960 + 73,728 = 6,381,568; x 1.05 -> 7 MiB -> 128 MiB
    //   gpus 2: 2 * 6,381,568 + 38,567,936 = 51,331,072; x 1.05 -> 52 MiB -> 128 MiB
    {"cifar", pageup(128ull * 3 * 32 * 32 * 4) + pageup(128ull * 8), {2, 2, 2}, {128, 128, 128},
     "kuangliu/pytorch-cifar"},
    // coco: batch 16, 8 workers, min 256m. batch_bytes = 19,660,800 (4800 pages) + 20,480 = 19,681,280
    //   gpus 0: per_rank = 19 * 19,681,280 + 196,608 = 374,140,928; x 1.05 -> 375 MiB (374.65)
    //   gpus 1: per_rank = 16 * 19,681,280 + 196,608 = 315,097,088; x 1.05 -> 316 MiB (315.53)
    //   gpus 2: 2 * 315,097,088 + 38,567,936 = 668,762,112; x 1.05 -> 670 MiB (669.67)
    {"coco", pageup(16ull * 3 * 640 * 640 * 1) + pageup(16ull * 50 * 6 * 4), {8, 8, 8}, {375, 316, 670},
     "Ultralytics"},
    // medical: batch 2, 4 workers, min 256m. two fields of 16 MiB -> batch_bytes 32 MiB
    //   gpus 0: per_rank = 11 * 32 MiB + 114,688 = 369,213,440; x 1.05 -> 370 MiB (369.71)
    //   gpus 1: per_rank = 8 * 32 MiB + 114,688 = 268,550,144; x 1.05 -> 269 MiB (268.91)
    //   gpus 2: 2 * 268,550,144 + 38,567,936 = 575,668,224; x 1.05 -> 577 MiB (576.45)
    {"medical", 2 * pageup(2ull * 1 * 128 * 128 * 128 * 4), {4, 4, 4}, {370, 269, 577}, "MONAI"},
    // video: batch 24, 10 workers, min 256m. batch_bytes = 57,802,752 (14112 pages) + 4096 = 57,806,848
    //   gpus 0: per_rank = 23 * 57,806,848 + 237,568 = 1,329,795,072; x 1.05 -> 1332 MiB (1331.60)
    //   gpus 1: per_rank = 20 * 57,806,848 + 237,568 = 1,156,374,528; x 1.05 -> 1158 MiB (1157.94)
    //   gpus 2: 2 * 1,156,374,528 + 38,567,936 = 2,351,316,992; x 1.05 -> 2355 MiB (2354.51)
    {"video", pageup(24ull * 3 * 16 * 112 * 112 * 4) + pageup(24ull * 8), {10, 10, 10}, {1332, 1158, 2355},
     "references/video_classification"},
};
// clang-format on

TEST(BuiltinProfiles, ListIsExactlyTheShippedSet) {
  std::vector<std::string> names;
  for (const auto& e : source_store().list()) {
    names.push_back(e.name);
    EXPECT_TRUE(e.shadowed.empty()) << e.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cifar", "coco", "default", "imagenet", "medical", "mnist", "multi-gpu",
                                             "ray-worker", "triton-python", "video", "vllm"}));
}

TEST(BuiltinProfiles, PlannedShmByHand) {
  ProfileStore store = source_store();
  for (const Expected& x : kExpected) {
    SCOPED_TRACE(x.name);
    Profile p = store.load(x.name, false);
    EXPECT_EQ(p.name, x.name);
    for (unsigned gpus = 0; gpus <= 2; ++gpus) {
      SCOPED_TRACE("gpus=" + std::to_string(gpus));
      SizingRequest r;
      r.gpus = gpus;
      r.cpus = kCpus;
      ShmPlan plan = plan_shm(p, r);
      EXPECT_EQ(plan.batch_bytes, x.batch_bytes);
      EXPECT_EQ(plan.workers, x.workers[gpus]);
      // every built-in has pin_memory true and no persistent_workers: without a GPU no pin thread, so
      // the loop's two batches and the last batch of a pass the next pass's workers keep
      EXPECT_EQ(plan.hold, gpus == 0 ? 3u : 0u);
      EXPECT_EQ(plan.shm, x.shm[gpus] * MiB);
      EXPECT_TRUE(plan.fits());
    }
  }
}

// The serving profiles: no DataLoader (workers_per_gpu 0, so per_rank 0), the engines they name
// (engines_test works each term by hand) and NCCL's SHM term between the GPUs (2 ranks 38,567,936,
// 4 ranks 154,271,744, 8 ranks 308,543,488); need = roundup(1.05 x (nccl + engines), 64 KiB),
// shm = max(need in whole MiB, min_shm 256 MiB).
struct ServingExpected {
  const char* name;
  std::optional<std::uint64_t> memory_limit;
  unsigned gpus;
  std::uint64_t engines;
  std::uint64_t shm_mib;
  const char* term;  // what --explain shows of the engine's term
};

constexpr std::uint64_t GiB = 1073741824;

// clang-format off
const ServingExpected kServing[] = {
    // vllm: one GPU runs vLLM's uni executor, no message queue: 0 -> min_shm.
    {"vllm", std::nullopt, 1, 0, 256, "uni executor"},
    // TP 2: broadcast 167,776,256 + 2 x 251,662,336 + 25,169,920 = 696,270,848;
    //       + nccl 38,567,936 = 734,838,784 x 1.05 -> 771,620,864 = 735.875 MiB -> 736
    {"vllm", std::nullopt, 2, 696270848, 736, "broadcast (16MiB + 1 + 2) x 10 chunks 160MiB"},
    // TP 4: 167,776,256 + 4 x 251,662,336 + 25,169,920 = 1,199,595,520; + 154,271,744
    //       = 1,353,867,264 x 1.05 -> 1,421,606,912 = 1355.75 MiB -> 1356
    {"vllm", std::nullopt, 4, 1199595520, 1356, "4 x response (24MiB + 2) x 10 chunks 240MiB"},
    // TP 8: 167,776,256 + 8 x 251,662,336 + 25,169,920 = 2,206,244,864; + 308,543,488
    //       = 2,514,788,352 x 1.05 -> 2,640,576,512 = 2518.25 MiB -> 2519
    {"vllm", std::nullopt, 8, 2206244864, 2519, "1 x TP group (4MiB + 8) x 6 chunks 24MiB"},
    // ray-worker with a 64 GiB limit: int(68,719,476,736 x 0.3) = 20,615,843,020, in plasma's 0.9 of
    //   /dev/shm: / 0.9 = 22,906,492,244.4 -> 22,906,492,245 -> page-rounded 22,906,494,976;
    //   1 GPU: x 1.05 -> 24,051,843,072 (22,937.6 MiB) -> 22938
    //   2 GPUs: + 38,567,936 = 22,945,062,912 x 1.05 -> 24,092,344,320 (22,976.3 MiB) -> 22977
    {"ray-worker", 64 * GiB, 1, 22906494976, 22938, "min(0.3 x memory limit 64GiB, cap 186.3GiB) / 0.9"},
    {"ray-worker", 64 * GiB, 2, 22906494976, 22977, "Ray's default object store"},
    // triton-python: one instance's 1 MiB pool; 2 GPUs: (1,048,576 + 38,567,936) x 1.05 -> 39.7 MiB -> 256;
    //   8 GPUs: (1,048,576 + 308,543,488) x 1.05 -> 325,124,096 = 310.06 MiB -> 311
    {"triton-python", std::nullopt, 1, 1048576, 256, "instances 1 x (shm-default-byte-size 1MiB) = 1MiB"},
    {"triton-python", std::nullopt, 8, 1048576, 311, "python_backend r26.07"},
};
// clang-format on

TEST(BuiltinProfiles, ServingProfilesSizedByHand) {
  ProfileStore store = source_store();
  for (const ServingExpected& x : kServing) {
    SCOPED_TRACE(std::string(x.name) + " gpus=" + std::to_string(x.gpus));
    SizingRequest r;
    r.gpus = x.gpus;
    r.cpus = kCpus;
    r.memory_limit = x.memory_limit;
    const ShmPlan plan = plan_shm(store.load(x.name, false), r);
    EXPECT_EQ(plan.workers, 0u);
    EXPECT_EQ(plan.per_rank, 0u);
    EXPECT_EQ(plan.engines.bytes, x.engines);
    EXPECT_EQ(plan.shm, x.shm_mib * MiB);
    EXPECT_TRUE(plan.fits());
    const std::string e = explain(plan);
    EXPECT_NE(e.find(x.term), std::string::npos) << e;
    // Every engine term says where it comes from and that it was not measured here.
    EXPECT_NE(e.find("(not measured here)"), std::string::npos) << e;
    EXPECT_NE(e.find("source: "), std::string::npos) << e;
  }
}

TEST(BuiltinProfiles, RayWorkerWithoutAMemoryLimitSaysWhatToGive) {
  SizingRequest r;
  r.gpus = 1;
  r.cpus = kCpus;
  const ShmPlan plan = plan_shm(source_store().load("ray-worker", false), r);
  ASSERT_TRUE(plan.refusal);
  const std::string words = refusal_words(*plan.refusal, kContainerWords);
  EXPECT_NE(words.find("profile ray-worker: Ray's object store defaults to 0.3 of the container's memory"),
            std::string::npos)
      << words;
  EXPECT_NE(words.find("give the container a memory limit"), std::string::npos) << words;
}

TEST(BuiltinProfiles, EveryBuiltinIsCovered) {
  std::map<std::string, bool> covered;
  for (const Expected& x : kExpected) covered[x.name] = true;
  for (const ServingExpected& x : kServing) covered[x.name] = true;
  for (const auto& e : source_store().list())
    EXPECT_TRUE(covered.count(e.name)) << e.name << " has no hand-worked case";
}

TEST(BuiltinProfiles, DescriptionsCiteTheirRecipe) {
  ProfileStore store = source_store();
  for (const Expected& x : kExpected) {
    Profile p = store.load(x.name, false);
    EXPECT_GE(p.description.size(), 40u) << x.name;
    EXPECT_NE(p.description.find(x.recipe), std::string::npos) << x.name << ": " << p.description;
    // A description that states a batch size must state the one the profile uses.
    if (std::string(x.name) != "multi-gpu") {
      EXPECT_NE(p.description.find("batch " + std::to_string(p.batch_size)), std::string::npos)
          << x.name << " (batch_size " << p.batch_size << "): " << p.description;
    }
  }
}

TEST(BuiltinProfiles, ServingDescriptionsCiteTheEnginesSource) {
  ProfileStore store = source_store();
  const std::map<std::string, std::string> cites = {{"vllm", "vllm-project/vllm shm_broadcast.py"},
                                                    {"ray-worker", "ray_constants.py"},
                                                    {"triton-python", "triton-inference-server/python_backend"}};
  for (const auto& [name, cite] : cites) {
    const Profile p = store.load(name, false);
    EXPECT_NE(p.description.find(cite), std::string::npos) << name << ": " << p.description;
    EXPECT_NE(p.description.find("No DataLoader (workers 0)"), std::string::npos) << name << ": " << p.description;
    EXPECT_EQ(p.workers_per_gpu, std::optional<std::uint64_t>(0)) << name;
  }
}

TEST(BuiltinProfiles, EveryBuiltinExtendsDefault) {
  ProfileStore store = source_store();
  for (const Expected& x : kExpected) {
    Profile p = store.load(x.name, false);
    EXPECT_EQ(p.chain.back().filename(), "default.json") << x.name;
  }
  for (const ServingExpected& x : kServing)
    EXPECT_EQ(store.load(x.name, false).chain.back().filename(), "default.json") << x.name;
  EXPECT_EQ(store.load("multi-gpu").chain.size(), 3u);  // multi-gpu -> imagenet -> default
}

TEST(BuiltinProfiles, SearchPathFindsThemThroughTheEnvironment) {
  Config config;
  ProfileStore store(profile_search_path({}, config.profile_dirs, false, test::builtin_only_env));
  // Last on the path; /etc/gpu-run/profiles.d on this machine may shadow them, which is fine.
  EXPECT_EQ(store.dirs().back(), fs::path(GPU_RUN_SOURCE_PROFILES));
  EXPECT_EQ(store.load("imagenet").batch_size, 64u);
}

}  // namespace
}  // namespace gpurun
