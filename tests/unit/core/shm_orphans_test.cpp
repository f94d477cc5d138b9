// Orphaned segments: found by what live processes hold (real child processes holding a segment
// open, and one mapped), removed by reap without touching those, and not when a process takes
// one between the listing and the removal. The live tests mount a tmpfs of their own (root).
#include "shm/shm_orphans.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/fd.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

namespace fs = std::filesystem;

// A tmpfs of the test's own, as a container's /dev/shm is: mounted in a mount namespace this test
// process enters (so that no process outside the test, which might be one reap cannot read, can
// see it), unmounted at the end.
class ShmDir {
 public:
  ShmDir() {
    if (::unshare(CLONE_NEWNS) != 0) {
      error_ = std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
      return;
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      error_ = std::string("make / private: ") + std::strerror(errno);
      return;
    }
    char path[] = "/tmp/gpu-run-reap-test.XXXXXX";
    if (!::mkdtemp(path)) {
      error_ = std::string("mkdtemp: ") + std::strerror(errno);
      return;
    }
    if (::mount("tmpfs", path, "tmpfs", 0, "size=16m") != 0) {
      error_ = std::string("mount tmpfs: ") + std::strerror(errno);
      ::rmdir(path);
      return;
    }
    path_ = path;
  }
  ~ShmDir() {
    if (path_.empty()) return;
    ::umount2(path_.c_str(), MNT_DETACH);
    ::rmdir(path_.c_str());
  }
  // Why there is none ("" when there is).
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  std::string error_;
};

// A child process that holds `path` open (or only mapped, its descriptor closed) until killed.
class Holder {
 public:
  enum How { kOpen, kMapped };
  Holder(const std::string& path, How how) {
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd < 0 || ::ftruncate(fd, 8192) != 0) ::_exit(1);
      void* map = nullptr;
      if (how == kMapped) {
        map = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) ::_exit(1);
        static_cast<char*>(map)[0] = 1;
        ::close(fd);
      }
      const char ok = 'y';
      if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char ok = 0;
    ready_ = ::read(ready[0], &ok, 1) == 1 && ok == 'y';
    ::close(ready[0]);
  }
  ~Holder() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool ready() const { return ready_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

// A segment written by a process that then exited, as a killed job leaves one.
void leave_behind(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, 4096) != 0 || ::write(fd, "x", 1) != 1) ::_exit(1);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
}

std::vector<std::string> names(const std::vector<ShmSegment>& segments) {
  std::vector<std::string> out;
  for (const ShmSegment& s : segments) out.push_back(s.name);
  return out;
}

struct Opened {
  UniqueFd dir;
  UniqueFd proc;
  dev_t dev = 0;
};

Opened open_dirs(const ShmDir& d) {
  Opened o;
  o.dir = UniqueFd(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  o.proc = UniqueFd(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (o.dir) ::fstat(o.dir.get(), &st);
  o.dev = st.st_dev;
  return o;
}

TEST(ShmOrphans, FamiliesByTheEnginesNaming) {
  const std::vector<std::pair<const char*, SegmentFamily>> cases = {
      {"nccl-WU88OE", SegmentFamily::kNccl},
      {"nccl-shm-recv-1462445a6f01cbfc-1-2-3", SegmentFamily::kNccl},
      {"torch_8289_606636967_0", SegmentFamily::kTorch},
      {"psm_1a2b3c4d", SegmentFamily::kPythonShm},
      {"sem.mp-k2j3h4", SegmentFamily::kPythonSem},
      {"vllm_offload_3f2a.mmap", SegmentFamily::kVllm},
      {"VLLM_OBJECT_STORAGE_SHM_BUFFER_1", SegmentFamily::kVllm},
      {"deepspeed_allreduce_buffer_0_127.0.0.1_29500_1", SegmentFamily::kDeepSpeed},
      {"triton_python_backend_shm_region_3", SegmentFamily::kTritonPython},
      {".gpu-run-reap.nccl-abc", SegmentFamily::kNccl},
      {"my-notes.txt", SegmentFamily::kOther},
      {"torch", SegmentFamily::kOther},
  };
  for (const auto& [name, family] : cases)
    EXPECT_EQ(segment_family_name(segment_family(name)), segment_family_name(family)) << name;
}

TEST(ShmOrphans, ClassifiedByHoldersAgeAndFamily) {
  std::vector<ShmSegment> segments = {{"nccl-a", 10, 1, SegmentFamily::kNccl, 1000},
                                      {"torch_1_2", 20, 2, SegmentFamily::kTorch, 1000},
                                      {"psm_new", 30, 3, SegmentFamily::kPythonShm, 1990},
                                      {"notes", 40, 4, SegmentFamily::kOther, 1000}};
  const OrphanReport r = classify_segments(segments, {2}, 2000, 60);
  EXPECT_EQ(names(r.orphans), std::vector<std::string>{"nccl-a"});
  EXPECT_EQ(names(r.held), std::vector<std::string>{"torch_1_2"});
  EXPECT_EQ(names(r.recent), std::vector<std::string>{"psm_new"});
  EXPECT_EQ(names(r.others), std::vector<std::string>{"notes"});
  EXPECT_EQ(r.orphan_bytes(), 10u);
}

TEST(ShmOrphans, OnlyTheDeadOwnersSegmentIsReaped) {
  ShmDir d;
  SKIP_UNLESS(!d.path().empty(), "needs root for a tmpfs of its own: " << d.error());
  Holder open_one(d.file("torch_100_200"), Holder::kOpen);
  Holder mapped_one(d.file("psm_5a5a5a"), Holder::kMapped);
  ASSERT_TRUE(open_one.ready());
  ASSERT_TRUE(mapped_one.ready());
  leave_behind(d.file("nccl-DeAd01"));
  leave_behind(d.file("notes.txt"));  // not an engine's: never reaped
  Opened o = open_dirs(d);
  ASSERT_TRUE(o.dir);
  ASSERT_TRUE(o.proc);

  std::vector<pid_t> unreadable;
  const OrphanReport report = find_orphans(o.dir.get(), o.dev, o.proc.get(), 0, &unreadable);
  EXPECT_EQ(names(report.orphans), std::vector<std::string>{"nccl-DeAd01"});
  EXPECT_EQ(names(report.held), (std::vector<std::string>{"psm_5a5a5a", "torch_100_200"}));
  EXPECT_EQ(names(report.others), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(report.orphan_bytes(), 4096u);

  const ReapResult result = reap_orphans(o.dir.get(), o.dev, o.proc.get(), report.orphans);
  EXPECT_TRUE(result.failed.empty()) << result.failed.front();
  EXPECT_EQ(names(result.removed), std::vector<std::string>{"nccl-DeAd01"});
  EXPECT_FALSE(fs::exists(d.file("nccl-DeAd01")));
  EXPECT_TRUE(fs::exists(d.file("torch_100_200")));
  EXPECT_TRUE(fs::exists(d.file("psm_5a5a5a")));
  EXPECT_TRUE(fs::exists(d.file("notes.txt")));
  EXPECT_FALSE(fs::exists(d.file(std::string(kReapQuarantinePrefix) + "nccl-DeAd01")));
}

TEST(ShmOrphans, ASegmentTakenAfterTheListingKeepsItsName) {
  ShmDir d;
  SKIP_UNLESS(!d.path().empty(), "needs root for a tmpfs of its own: " << d.error());
  leave_behind(d.file("torch_7_7"));
  leave_behind(d.file("nccl-Repl01"));
  Opened o = open_dirs(d);
  const OrphanReport report = find_orphans(o.dir.get(), o.dev, o.proc.get(), 0);
  ASSERT_EQ(names(report.orphans), (std::vector<std::string>{"nccl-Repl01", "torch_7_7"}));

  // Between the listing and the removal: a process opens one, and the other is replaced by a
  // new file of the same name.
  Holder late(d.file("torch_7_7"), Holder::kOpen);
  ASSERT_TRUE(late.ready());
  ASSERT_EQ(::unlink(d.file("nccl-Repl01").c_str()), 0);
  leave_behind(d.file("nccl-Repl01"));

  const ReapResult result = reap_orphans(o.dir.get(), o.dev, o.proc.get(), report.orphans);
  EXPECT_TRUE(result.removed.empty()) << result.removed.front().name;
  EXPECT_EQ(names(result.kept), (std::vector<std::string>{"nccl-Repl01", "torch_7_7"}));
  EXPECT_TRUE(fs::exists(d.file("torch_7_7")));
  EXPECT_TRUE(fs::exists(d.file("nccl-Repl01")));
  EXPECT_FALSE(fs::exists(d.file(std::string(kReapQuarantinePrefix) + "torch_7_7")));
}

}  // namespace
}  // namespace gpurun
