// The built-in profiles, loaded from the source tree through ProfileStore, sized by hand.
//
// Model (DESIGN.md), worked below for each profile with cpus = 8 so that "auto" workers
// are fixed:
//   batch_bytes = sum of pageup(batch * prod(shape) * dtype_size)      page = 4096
//   per_rank    = (prefetch * workers + 1) * batch_bytes                 all pin_memory
//   need        = roundup(1.25 * (ranks * per_rank + (ranks > 1 ? nccl : 0)), 1 MiB)
//   shm         = max(need, min_shm)                                     ranks = max(gpus, 1)
// All built-ins use prefetch 2 and headroom 1.25 (from default.json).

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "config.hpp"
#include "profile_store.hpp"
#include "sizing.hpp"

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
    //   1 rank: workers min(8/1, 32/8+4 = 8) = 8; per_rank = 17 * 19,271,680 = 327,618,560
    //           1.25 * 327,618,560 = 409,523,200 = 390.55 MiB -> 391 MiB
    //   2 ranks: workers min(8/2 = 4, 8) = 4; per_rank = 9 * 19,271,680 = 173,445,120
    //           1.25 * (346,890,240 + 536,870,912) = 1,104,701,440 = 1053.5 MiB -> 1054 MiB
    {"default", pageup(32ull * 3 * 224 * 224 * 4) + pageup(32ull * 8), {8, 8, 4}, {391, 391, 1054},
     "DataLoader defaults"},
    // imagenet: batch 64, auto, nccl 1g, min 256m.
    //   pageup(64*3*224*224*4) = 38,535,168 (9408 pages) + pageup(64*8) = 4096 -> 38,539,264
    //   1 rank: workers min(8, 64/8+4 = 12) = 8; per_rank = 17 * 38,539,264 = 655,167,488
    //           1.25 * 655,167,488 = 818,959,360 = 781.02 MiB -> 782 MiB
    //   2 ranks: workers min(4, 12) = 4; per_rank = 9 * 38,539,264 = 346,853,376
    //           1.25 * (693,706,752 + 1,073,741,824) = 2,209,310,720 = 2106.96 MiB -> 2107 MiB
    {"imagenet", pageup(64ull * 3 * 224 * 224 * 4) + pageup(64ull * 8), {8, 8, 4}, {782, 782, 2107},
     "examples/imagenet"},
    // multi-gpu: imagenet with nccl_reserve 1g and headroom 1.25 restated: the same numbers.
    {"multi-gpu", pageup(64ull * 3 * 224 * 224 * 4) + pageup(64ull * 8), {8, 8, 4}, {782, 782, 2107},
     "NCCL"},
    // mnist: batch 64, 1 worker, nccl 512m, min 128m.
    //   pageup(64*1*28*28*4) = 200,704 (49 pages) + 4096 -> 204,800
    //   per_rank = 3 * 204,800 = 614,400
    //   1 rank: 1.25 * 614,400 = 768,000 -> 1 MiB, raised to min_shm 128 MiB
    //   2 ranks: 1.25 * (1,228,800 + 536,870,912) = 672,624,640 = 641.47 MiB -> 642 MiB
    {"mnist", pageup(64ull * 1 * 28 * 28 * 4) + pageup(64ull * 8), {1, 1, 1}, {128, 128, 642},
     "examples/mnist"},
    // cifar: batch 128, 2 workers, nccl 512m, min 128m.
    //   pageup(128*3*32*32*4) = 1,572,864 (384 pages) + pageup(128*8 = 1024) = 4096 -> 1,576,960
    //   per_rank = 5 * 1,576,960 = 7,884,800
    //   1 rank: 1.25 * 7,884,800 = 9,856,000 -> 10 MiB, raised to min_shm 128 MiB
    //   2 ranks: 1.25 * (15,769,600 + 536,870,912) = 690,800,640 = 658.8 MiB -> 659 MiB
    {"cifar", pageup(128ull * 3 * 32 * 32 * 4) + pageup(128ull * 8), {2, 2, 2}, {128, 128, 659},
     "kuangliu/pytorch-cifar"},
    // coco: batch 16, 8 workers, nccl 512m, min 256m.
    //   image pageup(16*3*640*640*1) = 19,660,800 (4800 pages)
    //   boxes pageup(16*50*6*4 = 19,200) = 20,480 (5 pages)        -> 19,681,280
    //   per_rank = 17 * 19,681,280 = 334,581,760
    //   1 rank: 1.25 * 334,581,760 = 418,227,200 = 398.86 MiB -> 399 MiB
    //   2 ranks: 1.25 * (669,163,520 + 536,870,912) = 1,507,543,040 = 1437.7 MiB -> 1438 MiB
    {"coco", pageup(16ull * 3 * 640 * 640 * 1) + pageup(16ull * 50 * 6 * 4), {8, 8, 8}, {399, 399, 1438},
     "Ultralytics"},
    // medical: batch 2, 4 workers, nccl 512m, min 256m.
    //   two fields of pageup(2*1*128*128*128*4) = 16,777,216 (16 MiB) -> 32 MiB
    //   per_rank = 9 * 32 MiB = 288 MiB
    //   1 rank: 1.25 * 288 MiB = 360 MiB exactly
    //   2 ranks: 1.25 * (576 MiB + 512 MiB) = 1360 MiB exactly
    {"medical", 2 * pageup(2ull * 1 * 128 * 128 * 128 * 4), {4, 4, 4}, {360, 360, 1360}, "MONAI"},
    // video: batch 24, 10 workers, nccl 512m, min 256m.
    //   clip pageup(24*3*16*112*112*4) = 57,802,752 (14112 pages) + label 4096 -> 57,806,848
    //   per_rank = 21 * 57,806,848 = 1,213,943,808
    //   1 rank: 1.25 * 1,213,943,808 = 1,517,429,760 = 1447.13 MiB -> 1448 MiB
    //   2 ranks: 1.25 * (2,427,887,616 + 536,870,912) = 3,705,948,160 = 3534.27 MiB -> 3535 MiB
    {"video", pageup(24ull * 3 * 16 * 112 * 112 * 4) + pageup(24ull * 8), {10, 10, 10}, {1448, 1448, 3535},
     "references/video_classification"},
};
// clang-format on

TEST(BuiltinProfiles, ListIsExactlyTheShippedSet) {
  std::vector<std::string> names;
  for (const auto& e : source_store().list()) {
    names.push_back(e.name);
    EXPECT_TRUE(e.shadowed.empty()) << e.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cifar", "coco", "default", "imagenet", "medical", "mnist",
                                             "multi-gpu", "video"}));
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
      EXPECT_EQ(plan.shm, x.shm[gpus] * MiB);
      EXPECT_TRUE(plan.problem.empty()) << plan.problem;
    }
  }
}

TEST(BuiltinProfiles, EveryBuiltinIsCovered) {
  std::map<std::string, bool> covered;
  for (const Expected& x : kExpected) covered[x.name] = true;
  for (const auto& e : source_store().list()) EXPECT_TRUE(covered.count(e.name)) << e.name << " has no hand-worked case";
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
  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "GPU_RUN_BUILTIN_PROFILES") return std::string(GPU_RUN_SOURCE_PROFILES);
    return std::nullopt;
  };
  ProfileStore store(profile_search_path({}, config, false, env));
  // Last on the path; /etc/gpu-run/profiles.d on this machine may shadow them, which is fine.
  EXPECT_EQ(store.dirs().back(), fs::path(GPU_RUN_SOURCE_PROFILES));
  EXPECT_EQ(store.load("imagenet").batch_size, 64u);
}

}  // namespace
}  // namespace gpurun
