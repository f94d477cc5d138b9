#include "shm/shm_resize.hpp"

#include <gtest/gtest.h>

#include "base/units.hpp"
#include "support/test_util.hpp"

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
  ResizePlan p = plan_resize(kPrivate, tmpfs(64 * kMiB, 1 * kMiB), ask(kGiB));
  EXPECT_FALSE(p.refusal);
  EXPECT_EQ(p.size, kGiB);
  EXPECT_FALSE(p.allow_shrink);
  p = plan_resize(kShareable, tmpfs(kGiB, 100 * kMiB), ask(100 * kMiB));
  EXPECT_FALSE(p.refusal);
  EXPECT_TRUE(p.allow_shrink);
  p = plan_resize(kPrivate, tmpfs(kGiB, 0), ask(kGiB));
  EXPECT_FALSE(p.refusal);
  EXPECT_FALSE(p.allow_shrink);
}

RefusalKind refusal_of(const IpcMode& ipc, const ShmFacts& shm, const ResizeAsk& a) {
  const ResizePlan p = plan_resize(ipc, shm, a);
  EXPECT_TRUE(p.refusal);
  return p.refusal ? p.refusal->kind : RefusalKind::kUnknownIpc;
}

TEST(ShmResizeTest, RefusesBelowUsedAndBelowAMiB) {
  const ResizePlan p = plan_resize(kPrivate, tmpfs(kGiB, 300 * kMiB), ask(256 * kMiB));
  ASSERT_TRUE(p.refusal);
  EXPECT_EQ(p.refusal->kind, RefusalKind::kBelowUsed);
  EXPECT_EQ(p.refusal->used, 300 * kMiB);  // the numbers its words need
  EXPECT_EQ(refusal_of(kPrivate, tmpfs(kGiB, 0), ask(kKiB)), RefusalKind::kBelowMiB);
}

TEST(ShmResizeTest, MemoryBudgetUnlessForced) {
  ResizeAsk a = ask(3 * kGiB);
  a.memory_limit = 4 * kGiB;
  a.memory_fraction_max = 0.5;
  ResizePlan p = plan_resize(kPrivate, tmpfs(64 * kMiB, 0), a);
  ASSERT_TRUE(p.refusal);
  EXPECT_EQ(p.refusal->kind, RefusalKind::kResizeOverBudget);
  EXPECT_EQ(p.refusal->memory_limit, 4 * kGiB);
  EXPECT_TRUE(p.over_budget);
  a.force = true;
  p = plan_resize(kPrivate, tmpfs(64 * kMiB, 0), a);
  EXPECT_FALSE(p.refusal);
  EXPECT_TRUE(p.over_budget);
  a = ask(2 * kGiB);
  a.memory_limit = 4 * kGiB;
  p = plan_resize(kPrivate, tmpfs(64 * kMiB, 0), a);
  EXPECT_FALSE(p.refusal);
  EXPECT_FALSE(p.over_budget);
}

TEST(ShmResizeTest, RefusesWhatHasNoOwnShm) {
  EXPECT_EQ(refusal_of(IpcMode{IpcKind::kNone, "", ""}, ShmFacts{}, ask(kGiB)), RefusalKind::kNoShm);
  EXPECT_EQ(refusal_of(IpcMode{IpcKind::kHost, "", ""}, ShmFacts{}, ask(kGiB)), RefusalKind::kHostIpc);
  ShmFacts host_ipc = tmpfs(8 * kGiB, 0);
  host_ipc.host_ipc = true;
  EXPECT_EQ(refusal_of(kShareable, host_ipc, ask(kGiB)), RefusalKind::kHostIpc);
  ShmFacts bound = tmpfs(8 * kGiB, 0);
  bound.host_shm = true;
  EXPECT_EQ(refusal_of(kPrivate, bound, ask(kGiB)), RefusalKind::kHostShmBound);
  EXPECT_EQ(refusal_of(IpcMode{IpcKind::kJoined, "x", ""}, tmpfs(kGiB, 0), ask(kGiB)), RefusalKind::kJoinedTwice);
  EXPECT_EQ(refusal_of(IpcMode{IpcKind::kOther, "", ""}, tmpfs(kGiB, 0), ask(kGiB)), RefusalKind::kUnknownIpc);
  EXPECT_EQ(refusal_of(kPrivate, ShmFacts{}, ask(kGiB)), RefusalKind::kNotTmpfs);
}

TEST(ShmResizeTest, RefusalsComeBeforeTheBudget) {
  // A refusal that nothing can override wins over one --force could.
  ResizeAsk a = ask(3 * kGiB);
  a.memory_limit = kGiB;
  EXPECT_EQ(refusal_of(IpcMode{IpcKind::kHost, "", ""}, ShmFacts{}, a), RefusalKind::kHostIpc);
  a.force = true;
  EXPECT_EQ(refusal_of(kPrivate, tmpfs(4 * kGiB, 3500 * kMiB), a), RefusalKind::kBelowUsed);
}

}  // namespace
}  // namespace gpurun
