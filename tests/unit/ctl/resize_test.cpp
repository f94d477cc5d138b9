#include "ctl/resize.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

ContainerInfo container(const std::string& name, const std::string& id, const std::string& ipc) {
  ContainerInfo c;
  c.engine = "docker";
  c.name = name;
  c.id = id;
  c.ipc = parse_ipc_mode(ipc);
  c.running = true;
  c.pid = 42;
  return c;
}

TEST(ResizeTest, OwnerOfAJoinedContainerIsTheOneItJoined) {
  const ContainerInfo owner = container("base", "bbbbbbbbbbbbbbbb", "shareable");
  std::string asked;
  auto inspect = [&](const std::string& name) {
    asked = name;
    return owner;
  };
  const ContainerInfo joiner = container("joiner", "jjjjjjjjjjjjjjjj", "container:bbbbbbbbbbbbbbbb");
  EXPECT_EQ(shm_owner(joiner, inspect).name, "base");
  EXPECT_EQ(asked, "bbbbbbbbbbbbbbbb");
  asked.clear();
  EXPECT_EQ(shm_owner(owner, inspect).name, "base");
  EXPECT_EQ(asked, "");
}

TEST(ResizeTest, AJoinedContainerWhoseOwnerStoppedIsRefused) {
  ContainerInfo stopped = container("base", "bbbbbbbbbbbbbbbb", "shareable");
  stopped.running = false;
  stopped.pid = 0;
  try {
    shm_owner(container("joiner", "jjjj", "container:bbbb"), [&](const std::string&) { return stopped; });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_CONTAINS(e.what(), "which is not running");
  }
}

TEST(ResizeTest, ReportSaysWhoSharesAndThatInspectKeepsTheOldSize) {
  ShmFacts before;
  before.size = 64 * kMiB;
  before.used = kMiB;
  const ContainerInfo priv = container("job", "0123456789abcdef", "private");
  std::string out = resize_report(priv, priv, before, kGiB, false);
  EXPECT_CONTAINS(out, "container job (0123456789ab, docker): /dev/shm 64MiB -> 1GiB (1MiB used, files kept)\n");
  EXPECT_CONTAINS(out, "`docker inspect` keeps showing the old ShmSize");
  EXPECT_NOT_CONTAINS(out, "shared");
  EXPECT_NOT_CONTAINS(out, "--force");

  const ContainerInfo base = container("base", "bbbbbbbbbbbbbbbb", "shareable");
  out = resize_report(base, base, before, kGiB, true);
  EXPECT_CONTAINS(out,
                  "every container that joined the IPC namespace of base (ipc=container:..., a pod) sees the new size");
  EXPECT_CONTAINS(out, "over the memory budget (--force)");

  const ContainerInfo joiner = container("joiner", "jjjjjjjjjjjjjjjj", "container:bbbbbbbbbbbbbbbb");
  out = resize_report(joiner, base, before, kGiB, false);
  EXPECT_CONTAINS(out, "container joiner (jjjjjjjjjjjj, docker)");
  EXPECT_CONTAINS(out, "it uses the IPC namespace of container base (bbbbbbbbbbbb");
  EXPECT_CONTAINS(out, "every container that joined");
}

// gpu-run-ctl resize words core's refusals (shm_resize.hpp) with the numbers and its own flags (kFlagWords).
ShmFacts tmpfs(std::uint64_t size, std::uint64_t used) {
  ShmFacts f;
  f.tmpfs_mount = true;
  f.size = size;
  f.used = used;
  return f;
}

std::string said(const IpcMode& ipc, const ShmFacts& shm, std::uint64_t size, const std::string& name = "c",
                 std::optional<std::uint64_t> limit = std::nullopt) {
  ResizeAsk a;
  a.size = size;
  a.memory_limit = limit;
  a.container = name;
  const ResizePlan p = plan_resize(ipc, shm, a);
  return p.refusal ? refusal_words(*p.refusal, kFlagWords) : "";
}

TEST(ResizeTest, RefusalsSayWhatWasWrongWithTheNumbers) {
  const IpcMode priv{IpcKind::kPrivate, "", ""};
  EXPECT_CONTAINS(said(priv, tmpfs(kGiB, 300 * kMiB), 256 * kMiB, "web"),
                  "size 256MiB is below what /dev/shm in container web holds now: 300MiB used of 1GiB");
  EXPECT_CONTAINS(said(priv, tmpfs(kGiB, 300 * kMiB), 256 * kMiB), "at least 300m");
  EXPECT_CONTAINS(said(priv, tmpfs(kGiB, 0), kKiB), "below 1MiB");
  const std::string budget = said(priv, tmpfs(64 * kMiB, 0), 3 * kGiB, "c", 4 * kGiB);
  EXPECT_CONTAINS(budget, "/dev/shm 3GiB for container c does not fit the memory limit 4GiB");
  EXPECT_CONTAINS(budget, "at most 50% = 2GiB may be shm");
  EXPECT_CONTAINS(budget, "--force");
  EXPECT_CONTAINS(budget, "raise the limit to 6144m");
  EXPECT_CONTAINS(said(IpcMode{IpcKind::kNone, "", ""}, ShmFacts{}, kGiB),
                  "container c has --ipc=none: it has no /dev/shm to resize");
  EXPECT_CONTAINS(said(IpcMode{IpcKind::kHost, "", ""}, ShmFacts{}, kGiB),
                  "(--ipc=host): the host's /dev/shm is never resized");
  ShmFacts host_ipc = tmpfs(8 * kGiB, 0);
  host_ipc.host_ipc = true;
  EXPECT_CONTAINS(said(IpcMode{IpcKind::kShareable, "", ""}, host_ipc, kGiB),
                  "shares the host's IPC namespace (--ipc=host): the host's /dev/shm is never resized");
  ShmFacts bound = tmpfs(8 * kGiB, 0);
  bound.host_shm = true;
  EXPECT_CONTAINS(said(priv, bound, kGiB), "(-v /dev/shm:/dev/shm): the host's /dev/shm is never resized");
  EXPECT_CONTAINS(said(IpcMode{IpcKind::kJoined, "x", ""}, tmpfs(kGiB, 0), kGiB),
                  "joined the IPC namespace of container x, which itself joined another: resize the one that owns it");
  EXPECT_CONTAINS(said(IpcMode{IpcKind::kOther, "", ""}, tmpfs(kGiB, 0), kGiB), "unknown IPC mode");
  EXPECT_CONTAINS(said(priv, ShmFacts{}, kGiB), "not a tmpfs mount of its own");
  EXPECT_EQ(said(priv, tmpfs(kGiB, 0), kGiB), "") << "no refusal, no words";
}

}  // namespace
}  // namespace gpurun
