#include "guard.hpp"

#include <gtest/gtest.h>

#include "units.hpp"

namespace gpurun {
namespace {

// A guard at max_shm: every sample that wants a growth is blocked, so no remount is tried.
ShmGuard guard_at_max_shm() {
  Config config;
  config.log_file = "";  // logs nowhere
  GuardLimits limits;
  limits.max_shm = 64 * kMiB;
  return ShmGuard(GuardPolicy{}, limits, config, "test: guard");
}

TEST(ShmGuardTest, BlockedWhileAFullShmCannotGrowAndCountedOncePerEpisode) {
  ShmGuard guard = guard_at_max_shm();
  EXPECT_FALSE(guard.blocked());
  guard.on_sample(1, "c", ShmUsage{64 * kMiB, 8 * kMiB});
  EXPECT_FALSE(guard.blocked()) << "enough free space";
  guard.on_sample(1, "c", ShmUsage{64 * kMiB, 60 * kMiB});
  EXPECT_TRUE(guard.blocked());
  guard.on_sample(1, "c", ShmUsage{64 * kMiB, 61 * kMiB});
  EXPECT_TRUE(guard.blocked()) << "still full: still blocked";
  EXPECT_EQ(guard.refusals(), 1u) << "one episode, one refusal";
  guard.on_sample(1, "c", ShmUsage{64 * kMiB, 4 * kMiB});
  EXPECT_FALSE(guard.blocked()) << "freed: no longer blocked";
  guard.on_sample(1, "c", ShmUsage{64 * kMiB, 62 * kMiB});
  EXPECT_EQ(guard.refusals(), 2u);
  EXPECT_EQ(guard.growths(), 0u);
}

TEST(ShmGuardTest, AnEmptyDirAtItsSizeLimitIsLeftThereNeverLowered) {
  Config config;
  config.log_file = "";
  GuardLimits limits;  // the webhook's pod: a plan of 64 MiB, the kubelet's tmpfs at its sizeLimit
  limits.headroom = 8 * kMiB;
  limits.size_limit = 544 * kMiB;
  ShmGuard guard(GuardPolicy{}, limits, config, "test: guard");
  // A pid no process has: a remount, had one been tried, would fail and count as refused.
  const int no_process = 0x3ffffff0;
  guard.on_sample(no_process, "c", ShmUsage{544 * kMiB, 0});
  guard.on_sample(no_process, "c", ShmUsage{544 * kMiB, 240 * kMiB});
  EXPECT_EQ(guard.growths(), 0u);
  EXPECT_EQ(guard.refusals(), 0u) << "no remount tried";
  EXPECT_FALSE(guard.blocked());
  guard.on_sample(no_process, "c", ShmUsage{544 * kMiB, 540 * kMiB});
  EXPECT_TRUE(guard.blocked()) << "full at the sizeLimit: blocked, neither grown past it nor remounted";
  EXPECT_EQ(guard.refusals(), 1u);
}

}  // namespace
}  // namespace gpurun
