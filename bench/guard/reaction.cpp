// bench/guard/reaction: the guard's reaction time, measured on its real code path.
//
// A child in its own mount namespace (unshare(1)) gets a tmpfs of --size MiB on /dev/shm (as a container's
// runtime mounts it). Each round fills it from the host (through /proc/PID/root) past the
// guard's threshold, takes the sample that crosses it (statvfs, as the guard does) and times
// ShmGrower::on_sample: the policy, the start of the remount helper (gpu-run-hook --remount,
// posix_spawn'ed), its sandbox, setns and the remount, and the samples after it until the growth
// is seen (the guard polls the helper without blocking). Then it empties /dev/shm and shrinks it back for the next
// round. Prints one line per percentile; --json for the run script.
//
//   reaction [--rounds 200] [--size 64]     (needs root)

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/process.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "oci/container.hpp"
#include "oci/host.hpp"
#include "shm/shm_grower.hpp"
#include "shm/shm_remount.hpp"

using namespace gpurun;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "reaction: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// A process with a private mount namespace and a fresh tmpfs on /dev/shm; waits for SIGKILL.
// Started through spawn, as every child of gpu-run's code is (unshare(1) makes the namespace).
Child start_target(std::uint64_t size) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) die("pipe");
  SpawnSpec spec;
  spec.argv = {"unshare",
               "--mount",
               "--propagation",
               "private",
               "sh",
               "-c",
               "mount -t tmpfs -o size=" + std::to_string(size) +
                   ",nosuid,nodev,noexec shm /dev/shm && echo x && exec sleep infinity"};
  spec.stdout_fd = ready[1];
  Child child = spawn(spec);
  ::close(ready[1]);
  char c;
  if (::read(ready[0], &c, 1) != 1) die("the target did not start");
  ::close(ready[0]);
  return child;
}

void fill(const std::string& path, std::uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("open " + path);
  if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) die("fallocate " + path);
  ::close(fd);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  std::uint64_t size = 64 * kMiB;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--size" && i + 1 < argc) {
      size = std::strtoull(argv[++i], nullptr, 10) * kMiB;
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: reaction [--rounds N] [--size MiB] [--json]\n");
      return 2;
    }
  }
  Child target_child = start_target(size);
  const pid_t target = target_child.pid();
  const std::string file = "/proc/" + std::to_string(target) + "/root/dev/shm/fill";
  Config config;
  config.log_file = "/dev/null";
  // The remount helper the guard runs: the build's gpu-run-hook (bench/guard/run builds it).
  config.hook_path = GPU_RUN_BIN_DIR "/gpu-run-hook";
  const auto host_dev = host_shm_device();
  std::vector<double> react_ms, sample_ms;
  for (int r = 0; r < rounds; ++r) {
    ShmGrower guard(config.guard, GuardLimits{}, config, "reaction");
    // 80% full: below the default 25% free.
    fill(file, size / 10 * 8);
    const auto t0 = std::chrono::steady_clock::now();
    const auto usage = shm_usage_of_pid(target);
    const auto t1 = std::chrono::steady_clock::now();
    if (!usage) die("statvfs");
    guard.on_sample(target, "bench", *usage);
    // The remount runs in the helper while the guard samples on: the growth is seen by the first
    // sample after it has ended.
    while (guard.remounting()) {
      ::usleep(100);  // not a spin: the helper needs the CPU more than the poll
      if (const auto again = shm_usage_of_pid(target)) guard.on_sample(target, "bench", *again);
    }
    const auto t2 = std::chrono::steady_clock::now();
    if (guard.growths() != 1) {
      std::fprintf(stderr, "reaction: round %d: the guard did not grow /dev/shm\n", r);
      return 1;
    }
    sample_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    react_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    ::unlink(file.c_str());
    remount_shm(RemountRequest{target, size, /*allow_shrink=*/true, host_dev}, hook_program_path(config.hook_path));
  }
  target_child = Child();  // killed and reaped
  const double p50 = percentile(react_ms, 0.5), p99 = percentile(react_ms, 0.99);
  const double max = *std::max_element(react_ms.begin(), react_ms.end());
  const double s50 = percentile(sample_ms, 0.5);
  if (json)
    std::printf("{\"rounds\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"sample_p50_ms\": %.4f}\n",
                rounds, p50, p99, max, s50);
  else
    std::printf("reaction over %d rounds: p50 %.3f ms, p99 %.3f ms, max %.3f ms (the sample itself: p50 %.4f ms)\n",
                rounds, p50, p99, max, s50);
  return 0;
}
