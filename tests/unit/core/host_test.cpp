#include "oci/host.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "base/error.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using test::TempDir;

unsigned affinity_now() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

TEST(ParseCpuMax, V2) {
  EXPECT_FALSE(parse_cpu_max("max 100000").has_value());
  EXPECT_FALSE(parse_cpu_max("max").has_value());
  EXPECT_FALSE(parse_cpu_max("").has_value());
  EXPECT_DOUBLE_EQ(parse_cpu_max("200000 100000").value(), 2.0);
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000 100000\n").value(), 1.5);
  EXPECT_DOUBLE_EQ(parse_cpu_max("50000 200000").value(), 0.25);
  EXPECT_DOUBLE_EQ(parse_cpu_max("150000").value(), 1.5);  // period defaults to 100000
  EXPECT_FALSE(parse_cpu_max("100000 0").has_value());
  EXPECT_FALSE(parse_cpu_max("abc 100000").has_value());
  EXPECT_FALSE(parse_cpu_max("-1 100000").has_value());
}

TEST(ParseCfsQuota, V1) {
  EXPECT_FALSE(parse_cfs_quota("-1", "100000").has_value());
  EXPECT_FALSE(parse_cfs_quota("", "100000").has_value());
  EXPECT_DOUBLE_EQ(parse_cfs_quota("250000", "100000").value(), 2.5);
  EXPECT_DOUBLE_EQ(parse_cfs_quota("100000", "100000").value(), 1.0);
  EXPECT_FALSE(parse_cfs_quota("100000", "0").has_value());
  EXPECT_FALSE(parse_cfs_quota("100000", "x").has_value());
}

TEST(ParseMemoryLimit, V1AndV2) {
  EXPECT_FALSE(parse_memory_limit("max").has_value());                  // v2: no limit
  EXPECT_FALSE(parse_memory_limit("9223372036854771712").has_value());  // v1: 2^63 - 4096, no limit
  EXPECT_FALSE(parse_memory_limit("").has_value());
  EXPECT_FALSE(parse_memory_limit("12g").has_value());
  EXPECT_EQ(parse_memory_limit("1073741824"), std::optional<std::uint64_t>(1073741824));
  EXPECT_EQ(parse_memory_limit("536870912"), std::optional<std::uint64_t>(536870912));
  // 1 PiB is a real (if large) limit, well below the v1 "none" sentinel.
  EXPECT_EQ(parse_memory_limit("1125899906842624"), std::optional<std::uint64_t>(1125899906842624));
}

TEST(ParentCgroupDir, SystemdDriver) {
  EXPECT_EQ(parent_cgroup_dir("kubepods-burstable-pod1a_2b.slice:cri-containerd:abc"),
            std::optional<std::string>("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a_2b.slice"));
  EXPECT_EQ(parent_cgroup_dir("kubepods-pod9.slice:cri-containerd:abc"),
            std::optional<std::string>("kubepods.slice/kubepods-pod9.slice"));
  EXPECT_EQ(parent_cgroup_dir("gpurun.slice:cri-containerd:abc"), std::optional<std::string>("gpurun.slice"));
  EXPECT_EQ(parent_cgroup_dir("..slice:x:y"), std::optional<std::string>("..slice"));  // a name, not ".."
  for (const char* bad : {"-.slice:cri-containerd:abc", ":cri-containerd:abc", "kubepods:cri-containerd:abc",
                          "a--b.slice:p:n", "-a.slice:p:n", "a-.slice:p:n", ".slice:p:n", "a/b.slice:p:n",
                          "../x.slice:p:n", "a.slice:p", "a.slice:p:n:m", "a.slice"})
    EXPECT_FALSE(parent_cgroup_dir(bad).has_value()) << bad;
}

TEST(ParentCgroupDir, CgroupfsDriver) {
  EXPECT_EQ(parent_cgroup_dir("/kubepods/burstable/pod1a-2b/abc"),
            std::optional<std::string>("kubepods/burstable/pod1a-2b"));
  EXPECT_EQ(parent_cgroup_dir("/gpurun-test//abc/"), std::optional<std::string>("gpurun-test"));
  for (const char* bad :
       {"/abc", "/", "", "kubepods/pod1/abc", "/kubepods/../../etc/abc", "/kubepods/./abc", "/kubepods/pod1/.."})
    EXPECT_FALSE(parent_cgroup_dir(bad).has_value()) << bad;
  EXPECT_FALSE(parent_cgroup_dir(std::string("/kube\0pods/pod1/abc", 18)).has_value());
}

TEST(ProbeParentMemoryLimit, V2V1AndHostileTrees) {
  TempDir v2;
  v2.write("cgroup.controllers", "memory\n");
  v2.write("kubepods/pod1/memory.max", "1073741824\n");
  v2.write("kubepods/pod2/memory.max", "max\n");
  v2.write("kubepods/pod3/memory.max", std::string(100, '1'));  // past the bounded read
  EXPECT_EQ(probe_parent_memory_limit("/kubepods/pod1/abc", v2.path()), std::optional<std::uint64_t>(1073741824));
  EXPECT_FALSE(probe_parent_memory_limit("/kubepods/pod2/abc", v2.path()).has_value());
  EXPECT_FALSE(probe_parent_memory_limit("/kubepods/pod3/abc", v2.path()).has_value());
  EXPECT_FALSE(probe_parent_memory_limit("/kubepods/missing/abc", v2.path()).has_value());
  EXPECT_FALSE(probe_parent_memory_limit("/kubepods/../kubepods/pod1/abc", v2.path()).has_value());
  // A symlink on the way, or as the file, is not followed.
  TempDir outside;
  outside.write("memory.max", "4096\n");
  fs::create_directories(v2.path() / "kubepods");
  fs::create_directory_symlink(outside.path(), v2.path() / "kubepods/podlink");
  EXPECT_FALSE(probe_parent_memory_limit("/kubepods/podlink/abc", v2.path()).has_value());
  fs::create_directories(v2.path() / "kubepods/pod4");
  fs::create_symlink(outside.path() / "memory.max", v2.path() / "kubepods/pod4/memory.max");
  EXPECT_FALSE(probe_parent_memory_limit("/kubepods/pod4/abc", v2.path()).has_value());

  TempDir v1;  // no cgroup.controllers: the memory controller's hierarchy
  v1.write("memory/kubepods.slice/kubepods-pod1.slice/memory.limit_in_bytes", "536870912\n");
  v1.write("memory/kubepods.slice/kubepods-pod2.slice/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(probe_parent_memory_limit("kubepods-pod1.slice:cri-containerd:abc", v1.path()),
            std::optional<std::uint64_t>(536870912));
  EXPECT_FALSE(probe_parent_memory_limit("kubepods-pod2.slice:cri-containerd:abc", v1.path()).has_value());
}

TEST(ParseMeminfo, TotalAndAvailable) {
  const std::string text =
      "MemTotal:       16314344 kB\n"
      "MemFree:         1234567 kB\n"
      "MemAvailable:    8157172 kB\n"
      "Buffers:          123456 kB\n"
      "Shmem:             65536 kB\n";
  auto [total, available] = parse_meminfo(text);
  EXPECT_EQ(total, 16314344ull * 1024);     // 16705888256
  EXPECT_EQ(available, 8157172ull * 1024);  // 8352944128
  auto [t0, a0] = parse_meminfo("");
  EXPECT_EQ(t0, 0u);
  EXPECT_EQ(a0, 0u);
}

TEST(ParseProcCgroup, V2) {
  EXPECT_EQ(parse_proc_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n", ""),
            std::optional<std::string>("/user.slice/user-1000.slice/session-2.scope"));
  EXPECT_EQ(parse_proc_cgroup("0::/\n", ""), std::optional<std::string>("/"));
  EXPECT_FALSE(parse_proc_cgroup("0::/\n", "memory").has_value());
}

TEST(ParseProcCgroup, V1AndHybrid) {
  const std::string text =
      "12:pids:/docker/abc\n"
      "11:memory:/docker/abc-mem\n"
      "4:cpu,cpuacct:/docker/abc-cpu\n"
      "3:cpuset:/docker/abc-set\n"
      "1:name=systemd:/docker/abc\n"
      "0::/system.slice/containerd.service\n";
  EXPECT_EQ(parse_proc_cgroup(text, "memory"), std::optional<std::string>("/docker/abc-mem"));
  EXPECT_EQ(parse_proc_cgroup(text, "cpu"), std::optional<std::string>("/docker/abc-cpu"));
  EXPECT_EQ(parse_proc_cgroup(text, "cpuacct"), std::optional<std::string>("/docker/abc-cpu"));
  EXPECT_EQ(parse_proc_cgroup(text, "cpuset"), std::optional<std::string>("/docker/abc-set"));
  EXPECT_EQ(parse_proc_cgroup(text, ""), std::optional<std::string>("/system.slice/containerd.service"));
  EXPECT_FALSE(parse_proc_cgroup(text, "blkio").has_value());
  EXPECT_FALSE(parse_proc_cgroup("4:cpu,cpuacct:/x\n", "").has_value());  // pure v1: no unified line
  EXPECT_FALSE(parse_proc_cgroup("garbage\n", "").has_value());
  // A path may itself contain ':'.
  EXPECT_EQ(parse_proc_cgroup("0::/a:b\n", ""), std::optional<std::string>("/a:b"));
}

TEST(ParseCpuList, Counts) {
  EXPECT_EQ(parse_cpu_list("0"), std::optional<unsigned>(1));
  EXPECT_EQ(parse_cpu_list("0-3"), std::optional<unsigned>(4));
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), std::optional<unsigned>(7));  // 4 + 1 + 2
  EXPECT_EQ(parse_cpu_list("5,7"), std::optional<unsigned>(2));
  EXPECT_FALSE(parse_cpu_list("").has_value());
  EXPECT_FALSE(parse_cpu_list("3-1").has_value());
  EXPECT_FALSE(parse_cpu_list("a-b").has_value());
  EXPECT_FALSE(parse_cpu_list("0-").has_value());
  EXPECT_FALSE(parse_cpu_list("0-70000").has_value());
}

// A process of its own (a record lock is a process's) that runs `act` and holds what it made
// until the holder goes: the node guard, or a user's reader.
class Holder {
 public:
  explicit Holder(const std::function<bool()>& act) {
    int ready[2];
    if (::pipe(ready) != 0 || ::pipe(release_) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(release_[1]);
      char ok = 'n';
      try {
        ok = act() ? 'y' : 'n';
      } catch (...) {
      }
      if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
      char c;
      const ssize_t n = ::read(release_[0], &c, 1);  // EOF when the parent lets go
      ::_exit(n >= 0 ? 0 : 1);
    }
    char ok = 0;
    ok_ = pid_ > 0 && ::read(ready[0], &ok, 1) == 1 && ok == 'y';
    ::close(ready[0]);
    ::close(ready[1]);
    ::close(release_[0]);
  }
  ~Holder() { let_go(); }
  bool ok() const { return ok_; }
  void let_go() {
    if (pid_ <= 0) return;
    ::close(release_[1]);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int release_[2] = {-1, -1};
  bool ok_ = false;
};

bool lock_file(const fs::path& path, short type) {
  const int fd = ::open(path.c_str(), type == F_WRLCK ? O_RDWR : O_RDONLY);  // left open: the lock stays
  struct flock whole {};
  whole.l_type = type;
  whole.l_whence = SEEK_SET;
  return fd >= 0 && ::fcntl(fd, F_SETLK, &whole) == 0;
}

// A door plans a learned profile tight only while a node guard holds its sign: another process's
// write lock on guard.alive (seen with F_GETLK); none, no file, a reader's lock, or the lock let go:
// no guard.
TEST(NodeGuardRuns, OnlyWhileAnotherProcessHoldsAWriteLock) {
  TempDir dir;
  const fs::path alive = dir.path() / "guard.alive";
  EXPECT_FALSE(node_guard_runs(alive)) << "no file: no guard has run";
  dir.write("guard.alive", "");
  EXPECT_FALSE(node_guard_runs(alive)) << "a file left by a guard that exited";
  {
    Holder reader([&] { return lock_file(alive, F_RDLCK); });
    ASSERT_TRUE(reader.ok());
    EXPECT_FALSE(node_guard_runs(alive)) << "any user may read-lock a 0644 file: that is no guard";
  }
  Holder guard([&] { return lock_file(alive, F_WRLCK); });
  ASSERT_TRUE(guard.ok());
  EXPECT_TRUE(node_guard_runs(alive)) << "the guard holds its lock";
  guard.let_go();
  EXPECT_FALSE(node_guard_runs(alive)) << "the kernel dropped the lock with the guard";
  const fs::path link = dir.path() / "link.alive";
  fs::create_symlink(alive, link);
  EXPECT_FALSE(node_guard_runs(link)) << "a symlink is not the guard's sign";
  // A FIFO at the path: a blocking open would wait for a writer, and every container start with it.
  const fs::path fifo = dir.path() / "fifo.alive";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(node_guard_runs(fifo)) << "a FIFO is not the guard's sign, and does not block";
}

// The guard's side: a new 0644 file each start, write-locked, so a read lock a user took on the
// last one neither hides the new guard nor keeps it from publishing.
TEST(NodeGuardRuns, TheGuardPublishesANewLockedFileEachStart) {
  TempDir dir;
  const fs::path alive = dir.path() / "guard.alive";
  Holder first([&] { return publish_node_guard_alive(alive).release() >= 0; });  // kept open to _exit
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(node_guard_runs(alive));
  struct stat st {};
  ASSERT_EQ(::stat(alive.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "every user's door can open it";
  first.let_go();
  EXPECT_FALSE(node_guard_runs(alive));
  Holder reader([&] { return lock_file(alive, F_RDLCK); });
  ASSERT_TRUE(reader.ok());
  Holder second([&] { return publish_node_guard_alive(alive).release() >= 0; });
  ASSERT_TRUE(second.ok()) << "a user's read lock on the old file does not stop the next guard";
  EXPECT_TRUE(node_guard_runs(alive));
  second.let_go();
  EXPECT_FALSE(node_guard_runs(alive));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u) << "no temporary file left beside it";
  EXPECT_THROW(publish_node_guard_alive(dir.path() / "no-such-dir" / "guard.alive"), Error);
}

TEST(UsableCpus, AffinityBoundedByQuota) {
  EXPECT_EQ(usable_cpus(8, std::nullopt), 8u);
  EXPECT_EQ(usable_cpus(8, 2.0), 2u);
  EXPECT_EQ(usable_cpus(8, 1.5), 2u);   // rounded up
  EXPECT_EQ(usable_cpus(8, 0.25), 1u);  // at least 1
  EXPECT_EQ(usable_cpus(4, 16.0), 4u);  // quota above affinity: affinity
  EXPECT_EQ(usable_cpus(0, std::nullopt), 1u);
  EXPECT_EQ(usable_cpus(8, 0.0), 8u);           // no quota
  EXPECT_EQ(usable_cpus(8, 3.0000000001), 3u);  // float noise does not add a CPU
}

const char* const kMeminfo =
    "MemTotal:        8000000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:    6000000 kB\n";

TEST(ProbeHost, CgroupV2) {
  TempDir root;
  root.write("proc/self/cgroup", "0::/docker/abc\n");
  root.write("proc/meminfo", kMeminfo);
  root.write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  root.write("sys/fs/cgroup/cpu.max", "max 100000\n");  // the root's, not ours
  root.write("sys/fs/cgroup/docker/abc/cpu.max", "50000 100000\n");
  root.write("sys/fs/cgroup/docker/abc/memory.max", "1073741824\n");
  HostInfo h = probe_host(root.path());
  EXPECT_DOUBLE_EQ(h.cgroup_cpu_quota.value_or(-1), 0.5);
  EXPECT_EQ(h.cgroup_memory_limit, std::optional<std::uint64_t>(1073741824));
  EXPECT_EQ(h.affinity_cpus, affinity_now());
  EXPECT_EQ(h.cpus, 1u);  // ceil(0.5) = 1, whatever the affinity
  EXPECT_EQ(h.mem_total, 8000000ull * 1024);
  EXPECT_EQ(h.mem_available, 6000000ull * 1024);
}

TEST(ProbeHost, CgroupV2NamespacedRoot) {
  // Inside a container with a cgroup namespace the process sees itself at "/".
  TempDir root;
  root.write("proc/self/cgroup", "0::/\n");
  root.write("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  root.write("sys/fs/cgroup/cpu.max", "100000 100000\n");
  root.write("sys/fs/cgroup/memory.max", "max\n");
  HostInfo h = probe_host(root.path());
  EXPECT_DOUBLE_EQ(h.cgroup_cpu_quota.value_or(-1), 1.0);
  EXPECT_FALSE(h.cgroup_memory_limit.has_value());
  EXPECT_EQ(h.cpus, 1u);
  EXPECT_EQ(h.mem_total, 0u);  // no meminfo in this tree
}

TEST(ProbeHost, CgroupV2Unlimited) {
  TempDir root;
  root.write("proc/self/cgroup", "0::/job\n");
  root.write("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  root.write("sys/fs/cgroup/job/cpu.max", "max 100000\n");
  root.write("sys/fs/cgroup/job/memory.max", "max\n");
  HostInfo h = probe_host(root.path());
  EXPECT_FALSE(h.cgroup_cpu_quota.has_value());
  EXPECT_FALSE(h.cgroup_memory_limit.has_value());
  EXPECT_EQ(h.cpus, affinity_now());
}

TEST(ProbeHost, CgroupV1) {
  TempDir root;
  // A hybrid host: v1 controllers plus an empty unified hierarchy, no cgroup.controllers at the top.
  root.write("proc/self/cgroup",
             "11:memory:/docker/abc\n"
             "4:cpu,cpuacct:/docker/abc\n"
             "1:name=systemd:/docker/abc\n"
             "0::/docker/abc\n");
  root.write("proc/meminfo", kMeminfo);
  root.write("sys/fs/cgroup/unified/cgroup.controllers", "");
  root.write("sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us", "250000\n");
  root.write("sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us", "100000\n");
  root.write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  HostInfo h = probe_host(root.path());
  EXPECT_DOUBLE_EQ(h.cgroup_cpu_quota.value_or(-1), 2.5);
  EXPECT_EQ(h.cgroup_memory_limit, std::optional<std::uint64_t>(2147483648));
  // ceil(2.5) = 3, bounded by the affinity of the machine running the test.
  EXPECT_EQ(h.cpus, std::min(3u, affinity_now()));
  EXPECT_EQ(h.mem_total, 8000000ull * 1024);
}

TEST(ProbeHost, CgroupV1Unlimited) {
  TempDir root;
  root.write("proc/self/cgroup", "11:memory:/\n4:cpu,cpuacct:/\n");
  root.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  root.write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  root.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  HostInfo h = probe_host(root.path());
  EXPECT_FALSE(h.cgroup_cpu_quota.has_value());
  EXPECT_FALSE(h.cgroup_memory_limit.has_value());
  EXPECT_EQ(h.cpus, affinity_now());
}

// A file that is there but cannot be read (a directory where meminfo should be) leaves its figure
// unknown and is named, with the errno's words, for the door to log; missing ones are not.
TEST(ProbeHost, AFileThatCannotBeReadIsNamed) {
  TempDir root;
  root.write("proc/self/cgroup", "0::/job\n");
  fs::create_directories(root.path() / "proc/meminfo");
  HostInfo h = probe_host(root.path());
  EXPECT_EQ(h.mem_total, 0u);
  ASSERT_EQ(h.unread.size(), 1u);
  EXPECT_CONTAINS(h.unread[0], (root.path() / "proc/meminfo").string() + ": read: " + std::strerror(EISDIR));
  EXPECT_TRUE(probe_host(TempDir().path()).unread.empty()) << "nothing there is nothing unread";
}

TEST(ProbeHost, EmptyRootIsNotAnError) {
  TempDir root;
  HostInfo h = probe_host(root.path());
  EXPECT_FALSE(h.cgroup_cpu_quota.has_value());
  EXPECT_FALSE(h.cgroup_memory_limit.has_value());
  EXPECT_EQ(h.cpus, affinity_now());
  EXPECT_EQ(h.mem_total, 0u);
  EXPECT_EQ(h.mem_available, 0u);
}

}  // namespace
}  // namespace gpurun

namespace gpurun {
namespace {

// Found by fuzz_spec: a quota of INT64_MAX/1 used to overflow a cast (undefined behaviour).
TEST(UsableCpus, HugeQuotasDoNotOverflow) {
  EXPECT_EQ(usable_cpus(8, 9.223372036854775807e18), 8u);
  EXPECT_EQ(usable_cpus(8, 1e300), 8u);
  EXPECT_EQ(usable_cpus(8, std::numeric_limits<double>::infinity()), 8u);
}

}  // namespace
}  // namespace gpurun

namespace gpurun {
namespace {

TEST(ProbeHost, CgroupV1InsideAContainerFallsBackToTheMountRoot) {
  // cgroup v1 without a cgroup namespace: /proc/self/cgroup names the host's path, but the
  // container's mount shows its own cgroup at the root.
  test::TempDir root;
  root.write("proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n");
  root.write("sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
  root.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "150000\n");
  root.write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  HostInfo h = probe_host(root.path());
  EXPECT_EQ(h.cgroup_memory_limit, std::optional<std::uint64_t>(536870912));
  EXPECT_DOUBLE_EQ(h.cgroup_cpu_quota.value_or(-1), 1.5);
}

}  // namespace
}  // namespace gpurun
