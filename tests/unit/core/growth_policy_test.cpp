#include "shm/growth_policy.hpp"

#include <gtest/gtest.h>

#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

// ImageNet's batch of 96 at 3x224x224 float32 (what the integration test runs): 55.1 MiB.
constexpr std::uint64_t kBatch = 96ull * 3 * 224 * 224 * 4 + 96 * 8;

ShmPlan plan(std::uint64_t workers, unsigned ranks, std::uint64_t batch_bytes) {
  ShmPlan p;
  p.workers = workers;
  p.ranks = ranks;
  p.batch_bytes = batch_bytes;
  p.max_shm = 256 * kGiB;
  return p;
}

TEST(GuardHeadroom, OneBatchPerWorkerOfEveryRank) {
  EXPECT_EQ(guard_headroom(plan(2, 1, kBatch)), 2 * kBatch);
  EXPECT_EQ(guard_headroom(plan(4, 8, 100)), 3200u);
  EXPECT_EQ(guard_headroom(plan(0, 1, kBatch)), 0u) << "no workers: nothing collates into /dev/shm";
  EXPECT_EQ(guard_headroom(plan(2, 1, 0)), 0u) << "no batch size known";
}

TEST(GuardLimits, MaxShmAndTheBudgetOfTheMemoryLimit) {
  ShmPlan p = plan(2, 1, kBatch);
  EXPECT_FALSE(guard_limits(p).budget_bytes.has_value());
  p.memory_limit = 2 * kGiB;
  p.memory_fraction_max = 0.5;
  const GuardLimits l = guard_limits(p);
  EXPECT_EQ(l.budget_bytes, std::optional<std::uint64_t>(kGiB));
  EXPECT_EQ(l.max_shm, 256 * kGiB);
  EXPECT_EQ(l.headroom, 2 * kBatch);
}

TEST(DecideGuard, NothingWhileTheNextAllocationsFit) {
  GuardLimits l;
  l.headroom = 2 * kBatch;
  EXPECT_EQ(decide_guard({}, l, kGiB, 0).action, GuardAction::kNone);
  EXPECT_EQ(decide_guard({}, l, kGiB, kGiB - 2 * kBatch).action, GuardAction::kNone) << "exactly enough free";
}

TEST(DecideGuard, GrowsToUsedPlusTwiceTheHeadroomInMiB) {
  GuardLimits l;
  l.headroom = 2 * kBatch;
  // Docker's 64 MiB with nothing used yet: two workers need 110 MiB at once.
  const GuardStep s = decide_guard({}, l, 64 * kMiB, 0);
  EXPECT_EQ(s.action, GuardAction::kGrow);
  EXPECT_EQ(s.headroom, 2 * kBatch);
  EXPECT_EQ(s.size, round_up(4 * kBatch, kMiB));
  EXPECT_EQ(s.size % kMiB, 0u);
  EXPECT_FALSE(s.capped);
  // Later: 3 batches held in 221 MiB, one more would not fit.
  const GuardStep later = decide_guard({}, l, s.size, 3 * kBatch);
  EXPECT_EQ(later.action, GuardAction::kGrow);
  EXPECT_EQ(later.size, round_up(7 * kBatch, kMiB));
}

TEST(DecideGuard, AtLeastTheStepFraction) {
  GuardLimits l;
  l.headroom = 10 * kMiB;
  // used + 2 x headroom = 95 MiB, but a step adds at least half of 100 MiB.
  const GuardStep s = decide_guard({}, l, 100 * kMiB, 95 * kMiB);
  EXPECT_EQ(s.size, 150 * kMiB);
  GuardPolicy small;
  small.step_fraction = 0.1;
  EXPECT_EQ(decide_guard(small, l, 100 * kMiB, 95 * kMiB).size, 115 * kMiB);
}

TEST(DecideGuard, WithoutAPlanAFractionOfTheSize) {
  const GuardLimits none;
  EXPECT_EQ(decide_guard({}, none, 64 * kMiB, 40 * kMiB).action, GuardAction::kNone) << "24 MiB free >= 16 MiB";
  const GuardStep s = decide_guard({}, none, 64 * kMiB, 50 * kMiB);
  EXPECT_EQ(s.action, GuardAction::kGrow);
  EXPECT_EQ(s.headroom, 16 * kMiB);
  EXPECT_EQ(s.size, 96 * kMiB) << "max(50 + 32, 64 x 1.5)";
  GuardPolicy half;
  half.min_free_fraction = 0.5;
  EXPECT_EQ(decide_guard(half, none, 64 * kMiB, 40 * kMiB).action, GuardAction::kGrow);
}

TEST(GuardLimits, TheBoundIsThePlansNeedWhenTheHeadroomIsKnown) {
  ShmPlan p = plan(2, 1, kBatch);
  p.profile = "imagenet";
  p.need = 331 * kMiB;
  LoaderPlan val;
  val.batch_bytes = 2 * kBatch;
  p.loaders = {LoaderPlan{}, val};
  EXPECT_EQ(guard_limits(p).bound, 331 * kMiB);
  EXPECT_EQ(guard_limits(p).batch, 2 * kBatch) << "the largest batch of any loader";
  p.profile = kDefaultProfileName;
  EXPECT_EQ(guard_limits(p).bound, 0u) << "the built-in default profile is a guess, not the job";
  EXPECT_EQ(guard_limits(p).headroom, 2 * kBatch) << "its headroom still applies";
  p.profile = "imagenet";
  p.batch_bytes = 0;
  EXPECT_EQ(guard_limits(p).bound, 0u) << "no headroom: the fraction policy, unbounded";
}

TEST(DecideGuard, WithinThePlansNeedGrowsNoFurtherThanIt) {
  GuardLimits l;
  l.headroom = 2 * kBatch;  // 110.3 MiB
  l.bound = 331 * kMiB;
  l.batch = kBatch;
  // From Docker's 64 MiB: used + 2 x headroom = 221 MiB, under the bound.
  const GuardStep first = decide_guard({}, l, 64 * kMiB, 0);
  EXPECT_EQ(first.action, GuardAction::kGrow);
  EXPECT_EQ(first.size, round_up(4 * kBatch, kMiB));
  // Two batches and a MiB held: used + 2 x headroom would be 331.6 MiB: the bound stops it.
  const GuardStep second = decide_guard({}, l, first.size, 2 * kBatch + kMiB);
  EXPECT_EQ(second.action, GuardAction::kGrow);
  EXPECT_EQ(second.size, 331 * kMiB);
  EXPECT_FALSE(second.capped) << "the bound is the plan's, not a limit: no warning";
  // Near the bound the model says less than two batches come, but one batch stays free.
  EXPECT_EQ(decide_guard({}, l, 331 * kMiB, 250 * kMiB).action, GuardAction::kNone) << "81 MiB free";
  const GuardStep near = decide_guard({}, l, 331 * kMiB, 300 * kMiB);
  EXPECT_EQ(near.action, GuardAction::kGrow);
  EXPECT_EQ(near.headroom, kBatch);
  EXPECT_EQ(near.size, round_up(300 * kMiB + kBatch, kMiB)) << "used + one batch: past the bound by what is held";
  // Grown so: one batch free again.
  EXPECT_EQ(decide_guard({}, l, near.size, 300 * kMiB).action, GuardAction::kNone);
}

TEST(DecideGuard, PastThePlansNeedTheHeadroomOrTheFractionWhicheverIsLarger) {
  GuardLimits l;
  l.headroom = 10 * kMiB;
  l.bound = 100 * kMiB;
  l.batch = 5 * kMiB;
  // 120 MiB held of 128: the plan was wrong; 25% of 128 MiB (32) is more than the headroom.
  const GuardStep s = decide_guard({}, l, 128 * kMiB, 120 * kMiB);
  EXPECT_EQ(s.action, GuardAction::kGrow);
  EXPECT_EQ(s.headroom, 32 * kMiB);
  EXPECT_EQ(s.size, 192 * kMiB) << "max(120 + 64, 128 x 1.5)";
  l.headroom = 100 * kMiB;
  EXPECT_EQ(decide_guard({}, l, 128 * kMiB, 120 * kMiB).headroom, 100 * kMiB);
}

TEST(DecideGuard, CappedByMaxShmThenBlocked) {
  GuardLimits l;
  l.headroom = 2 * kBatch;
  l.max_shm = 300 * kMiB;
  const GuardStep s = decide_guard({}, l, 200 * kMiB, 150 * kMiB);
  EXPECT_EQ(s.action, GuardAction::kGrow);
  EXPECT_EQ(s.size, 300 * kMiB);
  EXPECT_TRUE(s.capped);
  EXPECT_CONTAINS(s.reason, "the profile's max_shm 300MiB");
  const GuardStep b = decide_guard({}, l, 300 * kMiB, 250 * kMiB);
  EXPECT_EQ(b.action, GuardAction::kBlocked);
  EXPECT_CONTAINS(b.reason, "50MiB free of 300MiB");
  EXPECT_CONTAINS(b.reason, "need 110.3MiB");
  EXPECT_CONTAINS(b.reason, "max_shm 300MiB");
}

TEST(DecideGuard, TheBudgetWinsWhenSmaller) {
  GuardLimits l;
  l.headroom = 2 * kBatch;
  l.max_shm = 256 * kGiB;
  l.budget_bytes = 200 * kMiB + 12345;
  const GuardStep s = decide_guard({}, l, 64 * kMiB, 0);
  EXPECT_EQ(s.size, 200 * kMiB) << "whole MiB below the budget";
  EXPECT_CONTAINS(s.reason, "the memory budget");
  EXPECT_EQ(decide_guard({}, l, 200 * kMiB, 150 * kMiB).action, GuardAction::kBlocked);
}

TEST(DecideGuard, AnEmptyDirNeverPastItsSizeLimitNamedAsSuch) {
  // The kubelet evicts a pod whose emptyDir use passes its sizeLimit: the guard stops there,
  // and says it is the sizeLimit (not max_shm) that stopped it.
  GuardLimits l;
  l.headroom = 2 * kBatch;
  l.max_shm = 256 * kGiB;
  l.budget_bytes = 1 * kGiB;
  l.size_limit = 300 * kMiB;
  const GuardStep s = decide_guard({}, l, 200 * kMiB, 150 * kMiB);
  EXPECT_EQ(s.size, 300 * kMiB);
  EXPECT_CONTAINS(s.reason, "its emptyDir's sizeLimit 300MiB (the kubelet evicts a pod past it)");
  const GuardStep b = decide_guard({}, l, 300 * kMiB, 250 * kMiB);
  EXPECT_EQ(b.action, GuardAction::kBlocked);
  EXPECT_CONTAINS(b.reason, "it is at its emptyDir's sizeLimit 300MiB");
  l.budget_bytes = 250 * kMiB;  // a smaller budget still wins
  EXPECT_CONTAINS(decide_guard({}, l, 200 * kMiB, 150 * kMiB).reason, "the memory budget");
}

TEST(DecideGuard, TheRecordedCeilingCapsOnlyBelowTheGuardsOwn) {
  GuardLimits l;
  l.headroom = 64 * kMiB;
  l.budget_bytes = kGiB;
  l.recorded_ceiling = 128 * kMiB;
  const GuardStep s = decide_guard({}, l, 64 * kMiB, 40 * kMiB);
  EXPECT_EQ(s.size, 128 * kMiB);
  EXPECT_CONTAINS(s.reason, "the ceiling recorded when it was sized 128MiB");
  l.recorded_ceiling = 8 * kGiB;  // above the budget: the budget stands
  EXPECT_CONTAINS(decide_guard({}, l, 900 * kMiB, 890 * kMiB).reason, "the memory budget");
}

TEST(GrowthCeiling, TheSmallerOfMaxShmAndTheBudgetNeverBelowTheSize) {
  GuardLimits l;
  EXPECT_EQ(growth_ceiling(l, 64 * kMiB), 64 * kMiB) << "nothing known: no room";
  l.max_shm = 1 * kGiB;
  EXPECT_EQ(growth_ceiling(l, 64 * kMiB), 1 * kGiB);
  l.budget_bytes = 300 * kMiB + 12345;
  EXPECT_EQ(growth_ceiling(l, 64 * kMiB), 300 * kMiB) << "whole MiB below the budget";
  EXPECT_EQ(growth_ceiling(l, 2 * kGiB), 2 * kGiB) << "a size above both is kept";
  l.max_shm = 0;
  EXPECT_EQ(growth_ceiling(l, 64 * kMiB), 300 * kMiB);
}

TEST(DecideGuard, NeverSmallerThanTheSizeFound) {
  // Whatever the limits, a size found above them is kept: a growth is always larger, and a cap
  // below the size blocks instead of shrinking (fail-static: the door's size stays).
  const std::uint64_t sizes[] = {1 * kMiB, 64 * kMiB, 300 * kMiB + 12345, 544 * kMiB, 2 * kGiB};
  const std::uint64_t caps[] = {0, 32 * kMiB, 64 * kMiB, 544 * kMiB, 1 * kGiB};
  for (const std::uint64_t size : sizes)
    for (const std::uint64_t cap : caps)
      for (const int cap_kind : {0, 1, 2})
        for (const std::uint64_t headroom : {std::uint64_t{0}, 8 * kMiB, 110 * kMiB})
          for (const std::uint64_t used : {std::uint64_t{0}, size / 2, size - size / 8, size}) {
            GuardLimits l;
            l.headroom = headroom;
            if (cap_kind == 0) l.max_shm = cap;
            if (cap_kind == 1 && cap) l.budget_bytes = cap;
            if (cap_kind == 2) l.size_limit = cap;
            const GuardStep step = decide_guard({}, l, size, used);
            EXPECT_TRUE(step.action != GuardAction::kGrow || step.size > size)
                << "size " << size << " cap " << cap << " kind " << cap_kind << " used " << used << ": " << step.size;
          }
}

// The built-in "default" profile's guess: a headroom far below the job's real batches.
TEST(DecideGuard, ABurstLargerThanTheHeadroomGrowsEarlierAndFurther) {
  GuardLimits l;
  l.headroom = 8 * kMiB;
  // 24 MiB free: enough for the plan, not for four rises of 10 MiB.
  EXPECT_EQ(decide_guard({}, l, 64 * kMiB, 40 * kMiB).action, GuardAction::kNone);
  const GuardStep early = decide_guard({}, l, 64 * kMiB, 40 * kMiB, 10 * kMiB);
  EXPECT_EQ(early.action, GuardAction::kGrow) << "earlier";
  EXPECT_EQ(early.headroom, kGuardBurstSamples * 10 * kMiB);
  EXPECT_EQ(early.size, 120 * kMiB) << "40 + 2 x 40";
  // Where both grow, the burst's growth goes further.
  const GuardStep plan = decide_guard({}, l, 64 * kMiB, 60 * kMiB);
  const GuardStep burst = decide_guard({}, l, 64 * kMiB, 60 * kMiB, 10 * kMiB);
  EXPECT_EQ(plan.size, 96 * kMiB) << "max(60 + 16, 64 x 1.5)";
  EXPECT_EQ(burst.size, 140 * kMiB) << "60 + 2 x 40";
  // Without a plan the burst and the fraction: the larger.
  EXPECT_EQ(decide_guard({}, GuardLimits{}, 64 * kMiB, 40 * kMiB, 10 * kMiB).headroom, 40 * kMiB);
  EXPECT_EQ(decide_guard({}, GuardLimits{}, 64 * kMiB, 40 * kMiB, kMiB).headroom, 16 * kMiB) << "25% of 64 MiB";
  // A burst that asks no more than the plan changes nothing.
  EXPECT_EQ(decide_guard({}, l, 64 * kMiB, 60 * kMiB, 2 * kMiB).size, plan.size);
  EXPECT_EQ(decide_guard({}, l, 64 * kMiB, 40 * kMiB, 2 * kMiB).action, GuardAction::kNone);
}

TEST(DecideGuard, WithinThePlansNeedTheBurstChangesNothingUntilOneRiseOutgrowsTheHeadroom) {
  GuardLimits l;
  l.headroom = 2 * kBatch;  // 110.3 MiB
  l.bound = 331 * kMiB;
  l.batch = kBatch;
  // The integration test's job rises by at most 45 MiB a sample, less than its two batches: the
  // plan describes it, and it stops at the bound as without the burst (the cases of
  // WithinThePlansNeedGrowsNoFurtherThanIt).
  for (const std::uint64_t burst : {std::uint64_t{0}, 45 * kMiB, 2 * kBatch}) {
    EXPECT_EQ(decide_guard({}, l, 64 * kMiB, 0, burst).size, round_up(4 * kBatch, kMiB));
    EXPECT_EQ(decide_guard({}, l, 221 * kMiB, 2 * kBatch + kMiB, burst).size, 331 * kMiB);
    EXPECT_EQ(decide_guard({}, l, 331 * kMiB, 250 * kMiB, burst).action, GuardAction::kNone);
    EXPECT_EQ(decide_guard({}, l, 331 * kMiB, 300 * kMiB, burst).headroom, kBatch);
  }
  // Three batches in one sample: more than every worker's batch at once, the plan is wrong.
  const GuardStep wrong = decide_guard({}, l, 331 * kMiB, 250 * kMiB, 3 * kBatch);
  EXPECT_EQ(wrong.action, GuardAction::kGrow);
  EXPECT_EQ(wrong.headroom, kGuardBurstSamples * 3 * kBatch);
  EXPECT_EQ(wrong.size, round_up(250 * kMiB + 2 * kGuardBurstSamples * 3 * kBatch, kMiB)) << "past the bound";
  EXPECT_FALSE(wrong.capped);
}

TEST(DecideGuard, ABurstStaysWithinTheCapsAndIsNoRefusal) {
  GuardLimits l;
  l.headroom = 2 * kBatch;
  l.max_shm = 300 * kMiB;
  // Grows as far as max_shm for the burst, said to be capped.
  const GuardStep s = decide_guard({}, l, 200 * kMiB, 50 * kMiB, 100 * kMiB);
  EXPECT_EQ(s.action, GuardAction::kGrow);
  EXPECT_EQ(s.size, 300 * kMiB);
  EXPECT_TRUE(s.capped);
  // At max_shm with the plan's headroom free: the burst asks more, but that is no refusal.
  const GuardStep at_cap = decide_guard({}, l, 300 * kMiB, 150 * kMiB, 100 * kMiB);
  EXPECT_EQ(at_cap.action, GuardAction::kNone);
  // Short of the plan's headroom too: blocked as without the burst.
  const GuardStep b = decide_guard({}, l, 300 * kMiB, 250 * kMiB, 100 * kMiB);
  EXPECT_EQ(b.action, GuardAction::kBlocked);
  EXPECT_CONTAINS(b.reason, "max_shm 300MiB");
  // Every cap, every size: a growth is larger than the size and never above the cap.
  const std::uint64_t sizes[] = {1 * kMiB, 64 * kMiB, 300 * kMiB + 12345, 544 * kMiB, 2 * kGiB};
  const std::uint64_t caps[] = {32 * kMiB, 64 * kMiB, 544 * kMiB, 1 * kGiB};
  for (const std::uint64_t size : sizes)
    for (const std::uint64_t cap : caps)
      for (const int cap_kind : {0, 1, 2, 3, 4})
        for (const std::uint64_t burst : {kMiB, 45 * kMiB, 4 * kGiB})
          for (const std::uint64_t used : {std::uint64_t{0}, size / 2, size - size / 8, size}) {
            GuardLimits c;
            c.headroom = 8 * kMiB;
            if (cap_kind == 0) c.max_shm = cap;
            if (cap_kind == 1) c.budget_bytes = cap;
            if (cap_kind == 2) c.size_limit = cap;
            if (cap_kind == 3) c.recorded_ceiling = cap;
            if (cap_kind == 4) c.host_memory = cap;
            const GuardStep step = decide_guard({}, c, size, used, burst);
            if (step.action != GuardAction::kGrow) continue;
            EXPECT_GT(step.size, size) << "size " << size << " cap " << cap << " kind " << cap_kind;
            EXPECT_LE(step.size, growth_cap(c).bytes) << "size " << size << " cap " << cap << " kind " << cap_kind;
          }
}

TEST(DecideGuard, AWebhookEmptyDirStaysAtItsSizeLimit) {
  // The kubelet mounts it at its sizeLimit (544 MiB for a 1088Mi limit); the plan was 64 MiB.
  GuardLimits l;
  l.headroom = 8 * kMiB;
  l.size_limit = 544 * kMiB;
  EXPECT_EQ(decide_guard({}, l, 544 * kMiB, 0).action, GuardAction::kNone) << "unwritten: left as it is";
  EXPECT_EQ(decide_guard({}, l, 544 * kMiB, 240 * kMiB).action, GuardAction::kNone) << "240 MiB fit";
  const GuardStep full = decide_guard({}, l, 544 * kMiB, 540 * kMiB);
  EXPECT_EQ(full.action, GuardAction::kBlocked) << "full: neither grown past the sizeLimit nor lowered";
  EXPECT_CONTAINS(full.reason, "its emptyDir's sizeLimit 544MiB");
}

TEST(ShmExhaustionReport, SilentWhenTheJobDidNotRunOut) {
  EXPECT_EQ(shm_exhaustion_report({0, 200 * kMiB, kGiB, 0}, 0, ""), "");
  EXPECT_EQ(shm_exhaustion_report({1, 200 * kMiB, kGiB, 10 * kMiB}, 0, ""), "") << "failed for another reason";
  EXPECT_EQ(shm_exhaustion_report({135, 0, 0, 0}, 0, ""), "") << "never sampled";
}

TEST(ShmExhaustionReport, Sigbus) {
  const std::string r = shm_exhaustion_report({135, 40 * kMiB, 64 * kMiB, 30 * kMiB}, 0, "imagenet");
  EXPECT_CONTAINS(r, "exited 135 (SIGBUS");
  EXPECT_CONTAINS(r, "peak 40MiB of 64MiB\n");
  EXPECT_CONTAINS(r, "would have fitted: at least 128MiB (the size plus as much again)");
  EXPECT_CONTAINS(r, "gpu-run --shm-size 128m ...");
  // Advice a user can follow: not an edit of a profile that may be a built-in.
  EXPECT_EQ(r.find("min_shm"), std::string::npos) << r;
  EXPECT_CONTAINS(r, "gpu-run-ctl calibrate --out-profile NAME --profile imagenet ... -- IMAGE COMMAND...");
  EXPECT_CONTAINS(r, "gpu-run --guard");
}

TEST(ShmExhaustionReport, FullAtTheEndOrAtThePeakOfAFailedJob) {
  const std::string full = shm_exhaustion_report({1, 64 * kMiB, 64 * kMiB, 64 * kMiB}, 2 * kBatch, "");
  EXPECT_CONTAINS(full, "peak 64MiB of 64MiB (100%)");
  EXPECT_CONTAINS(full, "at least " + format_size(round_up(64 * kMiB + 2 * kBatch, kMiB)));
  EXPECT_CONTAINS(full, "one batch per worker");
  EXPECT_NOT_CONTAINS(full, "SIGBUS");
  EXPECT_NOT_CONTAINS(full, "profile");
  EXPECT_NE(shm_exhaustion_report({1, 64 * kMiB, 64 * kMiB, 0}, 0, ""), "") << "full at its peak, then failed";
  EXPECT_NE(shm_exhaustion_report({0, 64 * kMiB, 64 * kMiB, 64 * kMiB}, 0, ""), "") << "full at the end";
}

TEST(ShmExhaustionReport, NeverSuggestsLessThanThePlanForTheSameFlags) {
  // A job planned at 128m run with --shm-size 36m wrote 40 MiB: 36 MiB plus one small batch
  // would fail again; the plan for the same flags is the floor.
  ShmEnding e{1, 36 * kMiB, 36 * kMiB, 36 * kMiB};
  e.planned = 128 * kMiB;
  const std::string r = shm_exhaustion_report(e, 4 * 1024, "");
  EXPECT_CONTAINS(r, "at least 128MiB (gpu-run's plan for the same flags)");
  EXPECT_CONTAINS(r, "gpu-run --shm-size 128m ...");
  EXPECT_NOT_CONTAINS(r, "36m");
  e.planned = 32 * kMiB;
  EXPECT_CONTAINS(shm_exhaustion_report(e, 4 * 1024, ""), "--shm-size 37m") << "above the plan: size plus a batch";
}

}  // namespace
}  // namespace gpurun
