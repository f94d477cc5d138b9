#include "guard/guard_orphans.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/fd.hpp"
#include "base/process.hpp"
#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using std::chrono::milliseconds;

// A process with a tmpfs at /dev/shm of its own (a container's, without the engine) holding two
// engines' segments: NCCL's, which nobody has open (an orphan of 1 MiB), and PyTorch's, which the
// process keeps open on fd 3 (held, 2 MiB).
class ShmWithSegments : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_UNLESS(::geteuid() == 0, "needs root to mount a tmpfs in a mount namespace (CI runs as root)");
    target_ = spawn({"unshare", "--mount", "--propagation", "private", "sh", "-c",
                     "mount -t tmpfs -o size=64m tmpfs /dev/shm && "
                     "dd if=/dev/zero of=/dev/shm/nccl-AbC123 bs=1M count=1 2>/dev/null && "
                     "dd if=/dev/zero of=/dev/shm/torch_1_2 bs=1M count=2 2>/dev/null && "
                     "exec 3</dev/shm/torch_1_2 && touch /dev/shm/ready && exec sleep 60"});
    const std::string ready = "/proc/" + std::to_string(target_.pid()) + "/root/dev/shm/ready";
    for (int i = 0; i < 500 && ::access(ready.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(milliseconds(10));
    ASSERT_EQ(::access(ready.c_str(), F_OK), 0) << "the target's tmpfs was not set up";
  }

  Child target_;
};

TEST_F(ShmWithSegments, CountsTheSegmentsNoProcessHoldsAndNotTheHeldOnes) {
  UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(proc);
  EXPECT_EQ(orphaned_bytes_of_pid(target_.pid(), proc.get(), 0), 1 * kMiB) << "nccl-AbC123 only";
  EXPECT_EQ(orphaned_bytes_of_pid(target_.pid(), proc.get(), 3600), 0u) << "changed within the minimum age";
}

TEST_F(ShmWithSegments, TheScannerSetsTheMetricOfEachTrackedContainerOffTheSampler) {
  GuardMetrics metrics;
  GuardedShm c;
  c.id = "orphans-test";
  c.name = "t";
  c.engine = "docker";
  metrics.update(c);
  OrphanScanner scanner(metrics, milliseconds(20), 0);
  scanner.track(c.id, target_.pid());
  for (int i = 0; i < 500 && scanner.passes() < 2; ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_GE(scanner.passes(), 2u);
  metrics.update(c);  // a later sample keeps the count
  const std::string text = metrics.render(GuardSelf{});
  EXPECT_NE(text.find("gpu_run_shm_orphaned_bytes{container_id=\"orphans-test\",container_name=\"t\",profile=\"\","
                      "engine=\"docker\"} 1048576\n"),
            std::string::npos)
      << text;
}

TEST(OrphanedBytesTest, AProcessThatIsGoneHasNone) {
  UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_FALSE(orphaned_bytes_of_pid(0x3ffffff0, proc.get(), 0));
}

}  // namespace
}  // namespace gpurun
