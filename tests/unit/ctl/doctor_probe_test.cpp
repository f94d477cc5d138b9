// doctor's probes: what they measure of a container-like tree, and the pure parsers of what
// they read. The rules and the report are in doctor_test.cpp.

#include "ctl/doctor/doctor_probe.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "base/fd.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t MiB = 1ull << 20;

// A container-like tree under $TMPDIR that removes itself, opened as a root for the probes.
class ProbeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/gpu-run-doctor.XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp " + pattern + " failed");
    dir_ = pattern;
    fs::create_directories(dir_ / "dev");
  }
  void TearDown() override {
    if (mounted_) ::umount2((dir_ / "dev/shm").c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  // Mounts go to a mount namespace of this test's own (ctest runs each test in a process of
  // its own). False without root.
  bool private_mounts() {
    if (::geteuid() != 0) return false;
    if (!mounted_) {
      EXPECT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
      EXPECT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << std::strerror(errno);
      mounted_ = true;
    }
    return true;
  }
  // Mounts a filesystem of `type` at dev/shm.
  void mount_shm(const char* type, const std::string& data) {
    fs::create_directories(dir_ / "dev/shm");
    EXPECT_EQ(::mount("shm", (dir_ / "dev/shm").c_str(), type, 0, data.c_str()), 0) << std::strerror(errno);
  }
  DoctorFacts measure() {
    UniqueFd root(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    EXPECT_TRUE(root);
    DoctorFacts f;
    device_ = measure_shm(root.get(), dir_.string(), f);
    return f;
  }

  fs::path dir_;
  bool mounted_ = false;
  std::optional<dev_t> device_;
};

TEST_F(ProbeTree, NoShmIsMissing) {
  const DoctorFacts f = measure();
  EXPECT_EQ(f.shm_mount, ShmMount::kMissing);
  EXPECT_EQ(device_, std::nullopt);
  EXPECT_TRUE(f.files.empty());
}

TEST_F(ProbeTree, ADirectoryOfDevIsNotAMount) {
  write("dev/shm/torch_1_2_0", "x");
  const DoctorFacts f = measure();
  EXPECT_EQ(f.shm_mount, ShmMount::kNotMount);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "dev/shm").c_str(), &st), 0);
  EXPECT_EQ(device_, std::optional<dev_t>(st.st_dev));
  ASSERT_EQ(f.files.size(), 1u);
  EXPECT_EQ(f.files[0].name, "torch_1_2_0");
}

TEST_F(ProbeTree, SymlinksResolveInsideTheTree) {
  // The image's /dev/shm -> /run/shm is the tree's /run/shm, not the host's.
  write("run/shm/nccl-abc", "x");
  fs::create_directory_symlink("/run/shm", dir_ / "dev/shm");
  const DoctorFacts f = measure();
  ASSERT_EQ(f.files.size(), 1u);
  EXPECT_EQ(f.files[0].name, "nccl-abc");
}

TEST_F(ProbeTree, ListsEntriesSortedWithTheSpaceTheyOccupy) {
  write("dev/shm/b", std::string(8192, 'x'));
  write("dev/shm/a", "");
  fs::create_directories(dir_ / "dev/shm/c-dir");
  fs::create_symlink("b", dir_ / "dev/shm/d-link");
  UniqueFd shm(::open((dir_ / "dev/shm").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(shm);
  const std::vector<ShmFile> files = list_shm_files(shm.get(), "/dev/shm");
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].name, "a");
  EXPECT_EQ(files[0].bytes, 0u);
  EXPECT_EQ(files[1].name, "b");
  EXPECT_GE(files[1].bytes, 8192u);
  EXPECT_EQ(files[2].bytes, 0u) << "a directory";
  EXPECT_EQ(files[3].bytes, 0u) << "a symlink";
}

TEST_F(ProbeTree, ATmpfsOfItsOwnWithItsSizeAndUse) {
  SKIP_UNLESS(private_mounts(), "needs root to mount a tmpfs (CI runs as root)");
  mount_shm("tmpfs", "size=8m");
  write("dev/shm/torch_9_9_0", std::string(MiB, 'x'));
  const DoctorFacts f = measure();
  EXPECT_EQ(f.shm_mount, ShmMount::kTmpfs);
  EXPECT_EQ(f.shm_size, 8 * MiB);
  EXPECT_GE(f.shm_used, MiB);
  ASSERT_EQ(f.files.size(), 1u);
  EXPECT_EQ(f.files[0].bytes, MiB);
}

TEST_F(ProbeTree, AMountThatIsNotATmpfs) {
  SKIP_UNLESS(private_mounts(), "needs root to mount a ramfs (CI runs as root)");
  mount_shm("ramfs", "");
  EXPECT_EQ(measure().shm_mount, ShmMount::kNotTmpfs);
}

TEST(DoctorProbe, StatusCpusAllowed) {
  const std::string status = "Name:\tpython\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,6\nMems_allowed_list:\t0\n";
  EXPECT_EQ(status_cpus_allowed(status), std::optional<unsigned>(5));
  EXPECT_EQ(status_cpus_allowed("Cpus_allowed_list:\t7"), std::optional<unsigned>(1));
  EXPECT_EQ(status_cpus_allowed("Name:\tpython\nCpus_allowed:\tff\n"), std::nullopt);
  EXPECT_EQ(status_cpus_allowed("Cpus_allowed_list:\t\n"), std::nullopt);
  EXPECT_EQ(status_cpus_allowed(""), std::nullopt);
}

TEST(DoctorProbe, InspectCpuQuota) {
  EXPECT_DOUBLE_EQ(inspect_cpu_quota({{"NanoCpus", 1500000000}}).value_or(-1), 1.5);
  EXPECT_DOUBLE_EQ(inspect_cpu_quota({{"CpuQuota", 50000}, {"CpuPeriod", 100000}}).value_or(-1), 0.5);
  EXPECT_DOUBLE_EQ(inspect_cpu_quota({{"CpuQuota", 300000}, {"CpuPeriod", 0}}).value_or(-1), 3.0)
      << "the kernel's 100ms period by default";
  EXPECT_DOUBLE_EQ(inspect_cpu_quota({{"NanoCpus", 2000000000}, {"CpuQuota", 50000}}).value_or(-1), 2.0);
  EXPECT_EQ(inspect_cpu_quota({{"NanoCpus", 0}, {"CpuQuota", -1}}), std::nullopt);
  EXPECT_EQ(inspect_cpu_quota(nlohmann::json::object()), std::nullopt);
}

}  // namespace
}  // namespace gpurun
