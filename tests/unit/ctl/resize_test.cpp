#include "resize.hpp"

#include <gtest/gtest.h>

#include "error.hpp"
#include "test_util.hpp"
#include "units.hpp"

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

}  // namespace
}  // namespace gpurun
