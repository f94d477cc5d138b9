// The built-in profiles, loaded from the source tree through ProfileStore, sized by hand.
//
// Model (docs/ARCHITECTURE.md, "The sizing model"), worked below for each profile with cpus = 8
// so that "auto" workers are fixed:
//   batch_bytes = sum of pageup(batch * prod(shape) * dtype_size)      page = 4096
//   per_rank    = (prefetch * workers + hold) * batch_bytes
//   hold        = (pin_memory && gpus > 0) ? 0 : 2                      all built-ins pin_memory,
//                 so gpus 0 -> hold 2 (no pin thread without CUDA), gpus 1 and 2 -> hold 0
//   need        = roundup(1.25 * (ranks * per_rank + (ranks > 1 ? nccl : 0)), 1 MiB)
//   shm         = max(need, min_shm)                                     ranks = max(gpus, 1)
// All built-ins use prefetch 2 and headroom 1.25 (from default.json).
// "a < x <= b" below brackets x between whole MiB (n MiB = n * 1,048,576) to show the rounding.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "config.hpp"
#include "profile_store.hpp"
#include "sizing.hpp"
#include "test_fixtures.hpp"

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
    // default: batch 32, auto, nccl 512m, min 256m.
    //   image pageup(32*3*224*224*4) = 19,267,584 (4704 pages), label pageup(32*8) = 4096
    //   batch_bytes = 19,271,680
    //   gpus 0: workers min(8/1, 32/8+4 = 8) = 8; hold 2; per_rank = 18 * 19,271,680 = 346,890,240
    //           1.25 * 346,890,240 = 433,612,800; 413 MiB = 433,061,888 < it <= 414 MiB -> 414 MiB
    //   gpus 1: workers 8; hold 0; per_rank = 16 * 19,271,680 = 308,346,880
    //           1.25 * 308,346,880 = 385,433,600; 367 MiB = 384,827,392 < it <= 368 MiB -> 368 MiB
    //   gpus 2: workers min(8/2 = 4, 8) = 4; hold 0; per_rank = 8 * 19,271,680 = 154,173,440
    //           1.25 * (308,346,880 + 536,870,912) = 1.25 * 845,217,792 = 1,056,522,240
    //           1007 MiB = 1,055,916,032 < it <= 1008 MiB = 1,056,964,608 -> 1008 MiB
    {"default", pageup(32ull * 3 * 224 * 224 * 4) + pageup(32ull * 8), {8, 8, 4}, {414, 368, 1008},
     "DataLoader defaults"},
    // imagenet: batch 64, auto, nccl 1g, min 256m.
    //   pageup(64*3*224*224*4) = 38,535,168 (9408 pages) + pageup(64*8) = 4096 -> 38,539,264
    //   gpus 0: workers min(8, 64/8+4 = 12) = 8; hold 2; per_rank = 18 * 38,539,264 = 693,706,752
    //           1.25 * 693,706,752 = 867,133,440; 826 MiB = 866,123,776 < it <= 827 MiB = 867,172,352
    //           -> 827 MiB
    //   gpus 1: workers 8; hold 0; per_rank = 16 * 38,539,264 = 616,628,224
    //           1.25 * 616,628,224 = 770,785,280; 735 MiB = 770,703,360 < it <= 736 MiB -> 736 MiB
    //   gpus 2: workers min(4, 12) = 4; hold 0; per_rank = 8 * 38,539,264 = 308,314,112
    //           1.25 * (616,628,224 + 1,073,741,824) = 1.25 * 1,690,370,048 = 2,112,962,560
    //           2015 MiB = 2,112,880,640 < it <= 2016 MiB = 2,113,929,216 -> 2016 MiB
    {"imagenet", pageup(64ull * 3 * 224 * 224 * 4) + pageup(64ull * 8), {8, 8, 4}, {827, 736, 2016},
     "examples/imagenet"},
    // multi-gpu: imagenet with nccl_reserve 1g and headroom 1.25 restated: the same numbers.
    {"multi-gpu", pageup(64ull * 3 * 224 * 224 * 4) + pageup(64ull * 8), {8, 8, 4}, {827, 736, 2016},
     "NCCL"},
    // mnist: batch 64, 1 worker, nccl 512m, min 128m.
    //   pageup(64*1*28*28*4) = 200,704 (49 pages) + 4096 -> 204,800
    //   gpus 0: hold 2; per_rank = 4 * 204,800 = 819,200
    //           1.25 * 819,200 = 1,024,000 -> 1 MiB, raised to min_shm 128 MiB
    //   gpus 1: hold 0; per_rank = 2 * 204,800 = 409,600
    //           1.25 * 409,600 = 512,000 -> 1 MiB, raised to min_shm 128 MiB
    //   gpus 2: hold 0; 1.25 * (819,200 + 536,870,912) = 1.25 * 537,690,112 = 672,112,640
    //           640 MiB = 671,088,640 < it <= 641 MiB = 672,137,216 -> 641 MiB
    {"mnist", pageup(64ull * 1 * 28 * 28 * 4) + pageup(64ull * 8), {1, 1, 1}, {128, 128, 641},
     "examples/mnist"},
    // cifar: batch 128, 2 workers, nccl 512m, min 128m.
    //   pageup(128*3*32*32*4) = 1,572,864 (384 pages) + pageup(128*8 = 1024) = 4096 -> 1,576,960
    //   gpus 0: hold 2; per_rank = 6 * 1,576,960 = 9,461,760
    //           1.25 * 9,461,760 = 11,827,200 -> 12 MiB, raised to min_shm 128 MiB
    //   gpus 1: hold 0; per_rank = 4 * 1,576,960 = 6,307,840
    //           1.25 * 6,307,840 = 7,884,800 -> 8 MiB, raised to min_shm 128 MiB
    //   gpus 2: hold 0; 1.25 * (12,615,680 + 536,870,912) = 1.25 * 549,486,592 = 686,858,240
    //           655 MiB = 686,817,280 < it <= 656 MiB = 687,865,856 -> 656 MiB
    {"cifar", pageup(128ull * 3 * 32 * 32 * 4) + pageup(128ull * 8), {2, 2, 2}, {128, 128, 656},
     "kuangliu/pytorch-cifar"},
    // coco: batch 16, 8 workers, nccl 512m, min 256m.
    //   image pageup(16*3*640*640*1) = 19,660,800 (4800 pages)
    //   boxes pageup(16*50*6*4 = 19,200) = 20,480 (5 pages)        -> 19,681,280
    //   gpus 0: hold 2; per_rank = 18 * 19,681,280 = 354,263,040
    //           1.25 * 354,263,040 = 442,828,800; 422 MiB = 442,499,072 < it <= 423 MiB -> 423 MiB
    //   gpus 1: hold 0; per_rank = 16 * 19,681,280 = 314,900,480
    //           1.25 * 314,900,480 = 393,625,600; 375 MiB = 393,216,000 < it <= 376 MiB -> 376 MiB
    //   gpus 2: hold 0; 1.25 * (629,800,960 + 536,870,912) = 1.25 * 1,166,671,872 = 1,458,339,840
    //           1390 MiB = 1,457,520,640 < it <= 1391 MiB = 1,458,569,216 -> 1391 MiB
    {"coco", pageup(16ull * 3 * 640 * 640 * 1) + pageup(16ull * 50 * 6 * 4), {8, 8, 8}, {423, 376, 1391},
     "Ultralytics"},
    // medical: batch 2, 4 workers, nccl 512m, min 256m.
    //   two fields of pageup(2*1*128*128*128*4) = 16,777,216 (16 MiB) -> 32 MiB
    //   gpus 0: hold 2; per_rank = 10 * 32 MiB = 320 MiB; 1.25 * 320 MiB = 400 MiB exactly
    //   gpus 1: hold 0; per_rank = 8 * 32 MiB = 256 MiB; 1.25 * 256 MiB = 320 MiB exactly
    //   gpus 2: hold 0; 1.25 * (512 MiB + 512 MiB) = 1280 MiB exactly
    {"medical", 2 * pageup(2ull * 1 * 128 * 128 * 128 * 4), {4, 4, 4}, {400, 320, 1280}, "MONAI"},
    // video: batch 24, 10 workers, nccl 512m, min 256m.
    //   clip pageup(24*3*16*112*112*4) = 57,802,752 (14112 pages) + label 4096 -> 57,806,848
    //   gpus 0: hold 2; per_rank = 22 * 57,806,848 = 1,271,750,656
    //           1.25 * 1,271,750,656 = 1,589,688,320
    //           1516 MiB = 1,589,641,216 < it <= 1517 MiB = 1,590,689,792 -> 1517 MiB
    //   gpus 1: hold 0; per_rank = 20 * 57,806,848 = 1,156,136,960
    //           1.25 * 1,156,136,960 = 1,445,171,200
    //           1378 MiB = 1,444,937,728 < it <= 1379 MiB = 1,445,986,304 -> 1379 MiB
    //   gpus 2: hold 0; 1.25 * (2,312,273,920 + 536,870,912) = 1.25 * 2,849,144,832 = 3,561,431,040
    //           3396 MiB = 3,560,964,096 < it <= 3397 MiB = 3,562,012,672 -> 3397 MiB
    {"video", pageup(24ull * 3 * 16 * 112 * 112 * 4) + pageup(24ull * 8), {10, 10, 10}, {1517, 1379, 3397},
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
                                             "video"}));
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
      EXPECT_EQ(plan.hold, gpus == 0 ? 2u : 0u);  // every built-in has pin_memory true
      EXPECT_EQ(plan.shm, x.shm[gpus] * MiB);
      EXPECT_TRUE(plan.problem.empty()) << plan.problem;
    }
  }
}

TEST(BuiltinProfiles, EveryBuiltinIsCovered) {
  std::map<std::string, bool> covered;
  for (const Expected& x : kExpected) covered[x.name] = true;
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

TEST(BuiltinProfiles, EveryBuiltinExtendsDefault) {
  ProfileStore store = source_store();
  for (const Expected& x : kExpected) {
    Profile p = store.load(x.name, false);
    EXPECT_EQ(p.chain.back().filename(), "default.json") << x.name;
  }
  EXPECT_EQ(store.load("multi-gpu").chain.size(), 3u);  // multi-gpu -> imagenet -> default
}

TEST(BuiltinProfiles, SearchPathFindsThemThroughTheEnvironment) {
  Config config;
  ProfileStore store(profile_search_path({}, config, false, test::builtin_only_env));
  // Last on the path; /etc/gpu-run/profiles.d on this machine may shadow them, which is fine.
  EXPECT_EQ(store.dirs().back(), fs::path(GPU_RUN_SOURCE_PROFILES));
  EXPECT_EQ(store.load("imagenet").batch_size, 64u);
}

}  // namespace
}  // namespace gpurun
