#include "shm_resize.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

ShmFacts tmpfs(std::uint64_t size, std::uint64_t used) {
  ShmFacts f;
  f.tmpfs_mount = true;
  f.size = size;
  f.used = used;
  return f;
}

ResizeAsk ask(std::uint64_t size) {
  ResizeAsk a;
  a.size = size;
  return a;
}

const IpcMode kPrivate{IpcKind::kPrivate, "", ""};
const IpcMode kShareable{IpcKind::kShareable, "", ""};

TEST(ShmResizeTest, ParsesIpcModes) {
  EXPECT_EQ(parse_ipc_mode("private").kind, IpcKind::kPrivate);
  EXPECT_EQ(parse_ipc_mode("").kind, IpcKind::kPrivate);
  EXPECT_EQ(parse_ipc_mode("shareable").kind, IpcKind::kShareable);
  EXPECT_EQ(parse_ipc_mode("none").kind, IpcKind::kNone);
  EXPECT_EQ(parse_ipc_mode("host").kind, IpcKind::kHost);
  const IpcMode joined = parse_ipc_mode("container:3f2a9c");
  EXPECT_EQ(joined.kind, IpcKind::kJoined);
  EXPECT_EQ(joined.owner, "3f2a9c");
  EXPECT_EQ(parse_ipc_mode("container:").kind, IpcKind::kOther);
  EXPECT_EQ(parse_ipc_mode("ns:/proc/1/ns/ipc").kind, IpcKind::kOther);
  // Messages name the engine's words, else the kind.
  EXPECT_EQ(ipc_mode_name(parse_ipc_mode("ns:/proc/1/ns/ipc")), "ns:/proc/1/ns/ipc");
  EXPECT_EQ(ipc_mode_name(IpcMode{IpcKind::kJoined, "3f2a", ""}), "container:3f2a");
  EXPECT_EQ(ipc_mode_name(IpcMode{IpcKind::kHost, "", ""}), "host");
}

// containerd's tasks: the mode from the spec's namespaces and /dev/shm mount, no engine's words.
TEST(ShmResizeTest, TheIpcModeOfASpec) {
  SpecFacts s;
  EXPECT_EQ(ipc_mode_of_spec(s).kind, IpcKind::kHost);  // no ipc namespace
  s.has_ipc_namespace = true;
  EXPECT_EQ(ipc_mode_of_spec(s).kind, IpcKind::kPrivate);  // the runtime's own tmpfs, or none mounted
  s.shm_type = SpecShmType::kTmpfs;
  EXPECT_EQ(ipc_mode_of_spec(s).kind, IpcKind::kPrivate);
  s.shm_type = SpecShmType::kBind;
  s.shm_source = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm";
  EXPECT_EQ(ipc_mode_of_spec(s).kind, IpcKind::kShareable);
  s.shm_source = "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/dshm";
  EXPECT_EQ(ipc_mode_of_spec(s).kind, IpcKind::kShareable);
  s.shm_source = "/dev/shm";
  EXPECT_EQ(ipc_mode_of_spec(s).kind, IpcKind::kHost);
  EXPECT_EQ(ipc_mode_of_spec(s).text, "");
}

TEST(ShmResizeTest, GrowsAndShrinksDownToUsed) {
  ResizePlan p = plan_resize("c", kPrivate, tmpfs(64 * kMiB, 1 * kMiB), ask(kGiB));
  EXPECT_EQ(p.refusal, "");
  EXPECT_EQ(p.size, kGiB);
  EXPECT_FALSE(p.allow_shrink);
  p = plan_resize("c", kShareable, tmpfs(kGiB, 100 * kMiB), ask(100 * kMiB));
  EXPECT_EQ(p.refusal, "");
  EXPECT_TRUE(p.allow_shrink);
  p = plan_resize("c", kPrivate, tmpfs(kGiB, 0), ask(kGiB));
  EXPECT_EQ(p.refusal, "");
  EXPECT_FALSE(p.allow_shrink);
}

TEST(ShmResizeTest, RefusesBelowUsedWithTheNumbers) {
  const ResizePlan p = plan_resize("web", kPrivate, tmpfs(kGiB, 300 * kMiB), ask(256 * kMiB));
  EXPECT_CONTAINS(p.refusal, "size 256MiB is below what /dev/shm in container web holds now: 300MiB used of 1GiB");
  EXPECT_CONTAINS(p.refusal, "at least 300m");
  EXPECT_CONTAINS(plan_resize("c", kPrivate, tmpfs(kGiB, 0), ask(kKiB)).refusal, "below 1MiB");
}

TEST(ShmResizeTest, MemoryBudgetUnlessForced) {
  ResizeAsk a = ask(3 * kGiB);
  a.memory_limit = 4 * kGiB;
  a.memory_fraction_max = 0.5;
  ResizePlan p = plan_resize("c", kPrivate, tmpfs(64 * kMiB, 0), a);
  EXPECT_CONTAINS(p.refusal, "/dev/shm 3GiB for container c does not fit the memory limit 4GiB");
  EXPECT_CONTAINS(p.refusal, "at most 50% = 2GiB may be shm");
  EXPECT_CONTAINS(p.refusal, "--force");
  EXPECT_CONTAINS(p.refusal, "raise the limit to 6144m");
  EXPECT_TRUE(p.over_budget);
  a.force = true;
  p = plan_resize("c", kPrivate, tmpfs(64 * kMiB, 0), a);
  EXPECT_EQ(p.refusal, "");
  EXPECT_TRUE(p.over_budget);
  a = ask(2 * kGiB);
  a.memory_limit = 4 * kGiB;
  p = plan_resize("c", kPrivate, tmpfs(64 * kMiB, 0), a);
  EXPECT_EQ(p.refusal, "");
  EXPECT_FALSE(p.over_budget);
}

TEST(ShmResizeTest, RefusesWhatHasNoOwnShm) {
  EXPECT_CONTAINS(plan_resize("c", IpcMode{IpcKind::kNone, "", ""}, ShmFacts{}, ask(kGiB)).refusal,
                  "container c has --ipc=none: it has no /dev/shm to resize");
  EXPECT_CONTAINS(plan_resize("c", IpcMode{IpcKind::kHost, "", ""}, ShmFacts{}, ask(kGiB)).refusal,
                  "(--ipc=host): the host's /dev/shm is never resized");
  ShmFacts host_ipc = tmpfs(8 * kGiB, 0);
  host_ipc.host_ipc = true;
  EXPECT_CONTAINS(plan_resize("c", kShareable, host_ipc, ask(kGiB)).refusal,
                  "shares the host's IPC namespace (--ipc=host): the host's /dev/shm is never resized");
  ShmFacts bound = tmpfs(8 * kGiB, 0);
  bound.host_shm = true;
  EXPECT_CONTAINS(plan_resize("c", kPrivate, bound, ask(kGiB)).refusal,
                  "(-v /dev/shm:/dev/shm): the host's /dev/shm is never resized");
  EXPECT_CONTAINS(plan_resize("c", IpcMode{IpcKind::kJoined, "x", ""}, tmpfs(kGiB, 0), ask(kGiB)).refusal,
                  "resize the one that owns it");
  EXPECT_CONTAINS(plan_resize("c", IpcMode{IpcKind::kOther, "", ""}, tmpfs(kGiB, 0), ask(kGiB)).refusal,
                  "unknown IPC mode");
  ShmFacts dir;
  EXPECT_CONTAINS(plan_resize("c", kPrivate, dir, ask(kGiB)).refusal, "not a tmpfs mount of its own");
}

TEST(ShmResizeTest, RefusalsComeBeforeTheBudget) {
  // A refusal that nothing can override wins over one --force could.
  ResizeAsk a = ask(3 * kGiB);
  a.memory_limit = kGiB;
  EXPECT_CONTAINS(plan_resize("c", IpcMode{IpcKind::kHost, "", ""}, ShmFacts{}, a).refusal, "never resized");
  a.force = true;
  EXPECT_CONTAINS(plan_resize("c", kPrivate, tmpfs(4 * kGiB, 3500 * kMiB), a).refusal, "holds now");
}

}  // namespace
}  // namespace gpurun
