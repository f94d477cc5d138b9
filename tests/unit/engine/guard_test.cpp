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

}  // namespace
}  // namespace gpurun
