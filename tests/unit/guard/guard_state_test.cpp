#include "guard/guard_state.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/units.hpp"

namespace gpurun {
namespace {

GuardStateEntry entry() {
  GuardStateEntry e;
  e.info.id = "0123456789abcdef";
  e.info.name = "job";
  e.info.engine = "containerd";
  e.info.pid = 4242;
  e.info.labels = {{"gpu-run.profile", "imagenet"}};
  e.info.annotations = {{"io.kubernetes.cri.sandbox-name", "ddp-0"}};
  e.info.shm_empty_dir = true;
  e.info.ipc = IpcMode{IpcKind::kJoined, "3f2a", "container:3f2a"};
  e.start_time = 987654;
  e.profile = "imagenet";
  e.note = "keeps 16MiB free";
  e.limits.headroom = 16 * kMiB;
  e.limits.bound = 40 * kMiB;
  e.limits.batch = 8 * kMiB;
  e.limits.max_shm = 128 * kMiB;
  e.limits.size_limit = 544 * kMiB;
  e.limits.recorded_ceiling = 100 * kMiB;
  e.limits.budget_bytes = kGiB;
  return e;
}

TEST(GuardState, RoundTripsEveryField) {
  GuardStateEntry no_budget = entry();
  no_budget.info.id = "fedcba";
  no_budget.limits.budget_bytes.reset();
  const std::vector<GuardStateEntry> back = parse_guard_state(guard_state_text({entry(), no_budget}));
  ASSERT_EQ(back.size(), 2u);
  const GuardStateEntry& e = back[0];
  EXPECT_EQ(e.info.id, "0123456789abcdef");
  EXPECT_EQ(e.info.name, "job");
  EXPECT_EQ(e.info.engine, "containerd");
  EXPECT_EQ(e.info.pid, 4242);
  EXPECT_TRUE(e.info.running);
  EXPECT_EQ(e.info.labels, entry().info.labels);
  EXPECT_EQ(e.info.annotations, entry().info.annotations);
  EXPECT_TRUE(e.info.shm_empty_dir);
  EXPECT_EQ(e.info.ipc.kind, IpcKind::kJoined);
  EXPECT_EQ(e.info.ipc.owner, "3f2a");
  EXPECT_EQ(e.info.ipc.text, "container:3f2a");
  EXPECT_EQ(e.start_time, 987654u);
  EXPECT_EQ(e.profile, "imagenet");
  EXPECT_EQ(e.note, "keeps 16MiB free");
  EXPECT_EQ(e.limits.headroom, 16 * kMiB);
  EXPECT_EQ(e.limits.bound, 40 * kMiB);
  EXPECT_EQ(e.limits.batch, 8 * kMiB);
  EXPECT_EQ(e.limits.max_shm, 128 * kMiB);
  EXPECT_EQ(e.limits.size_limit, 544 * kMiB);
  EXPECT_EQ(e.limits.recorded_ceiling, 100 * kMiB);
  EXPECT_EQ(e.limits.budget_bytes, kGiB);
  EXPECT_FALSE(back[1].limits.budget_bytes);
}

TEST(GuardState, AnOlderStateReadsAndBadEntriesAreSkipped) {
  // Written before annotations, size_limit and recorded_ceiling existed.
  const std::string old = R"([{"id": "a", "name": "n", "engine": "docker", "pid": 7, "start_time": 9, "profile": "",
    "note": "x", "labels": {}, "limits": {"headroom": 1, "bound": 0, "batch": 0, "max_shm": 0, "budget_bytes": null}}])";
  const auto read = parse_guard_state(old);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(read[0].info.annotations.empty());
  EXPECT_EQ(read[0].limits.size_limit, 0u);
  EXPECT_EQ(read[0].limits.recorded_ceiling, 0u);
  EXPECT_EQ(read[0].info.ipc.kind, IpcKind::kPrivate);
  // As main wrote it before the IPC mode was kept: read as private, what that guard had admitted.
  const std::string before_ipc = R"([{"id": "c", "name": "n", "engine": "containerd", "pid": 7, "start_time": 9,
    "profile": "p", "note": "x", "labels": {}, "annotations": {"gpu-run.decision": "{}"}, "shm_empty_dir": true,
    "limits": {"headroom": 1, "bound": 0, "batch": 0, "max_shm": 0, "size_limit": 5, "recorded_ceiling": 6,
    "budget_bytes": null}}])";
  const auto main_read = parse_guard_state(before_ipc);
  ASSERT_EQ(main_read.size(), 1u);
  EXPECT_EQ(main_read[0].info.ipc.kind, IpcKind::kPrivate);
  EXPECT_TRUE(main_read[0].info.shm_empty_dir);
  EXPECT_EQ(main_read[0].limits.recorded_ceiling, 6u);
  // A kind a later version names reads as other (not guarded as private).
  std::string later = guard_state_text({entry()});
  later.replace(later.find("\"joined\""), 8, "\"future\"");
  const auto later_read = parse_guard_state(later);
  ASSERT_EQ(later_read.size(), 1u);
  EXPECT_EQ(later_read[0].info.ipc.kind, IpcKind::kOther);
  for (const char* bad : {"", "not json", "{}", "[1]", R"([{"id": "a"}])"})
    EXPECT_TRUE(parse_guard_state(bad).empty()) << bad;
  GuardStateEntry no_id = entry(), no_pid = entry(), no_start = entry();
  no_id.info.id.clear();
  no_pid.info.pid = 0;
  no_start.start_time = 0;
  const auto kept = parse_guard_state(guard_state_text({no_id, entry(), no_pid, no_start}));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].info.id, entry().info.id);
  // A field of the wrong type skips that entry only.
  std::string text = guard_state_text({entry()});
  text.insert(1, R"({"id": "b", "name": 5, "engine": "docker", "pid": 7, "start_time": 9, "profile": "", "note": "",
    "labels": {}, "limits": {}},)");
  EXPECT_EQ(parse_guard_state(text).size(), 1u);
}

TEST(GuardState, TheStartTimeOfThisProcessAndNoneOfAPidThatIsNot) {
  EXPECT_GT(process_start_time(::getpid()), 0u);
  EXPECT_EQ(process_start_time(process_start_time(::getpid()) > 0 ? 1 << 30 : 0), 0u);
}

}  // namespace
}  // namespace gpurun
