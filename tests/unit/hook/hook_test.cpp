// gpu-run-hook run in-process, as sarus tests its hooks (a bundle on disk, the OCI state on the
// hook's stdin): each run is a forked child, since the hook joins the container's mount
// namespace. The "container" is a child process in a mount namespace of its own with a tmpfs
// at <rootfs>/dev/shm.
#include "hook/hook.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

struct HookRun {
  int rc = -1;
  std::string error_line;
};

class HookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const nlohmann::json config = {{"log_file", (dir_ / "gpu-run.log").string()},
                                   {"profile_dirs", {GPU_RUN_SOURCE_PROFILES}}};
    dir_.write("config.json", config.dump());
    std::filesystem::create_directories(dir_ / "bundle/rootfs/dev/shm");
  }
  void TearDown() override {
    if (container_ > 0) {
      ::kill(container_, SIGKILL);
      ::waitpid(container_, nullptr, 0);
    }
  }

  // The bundle's config.json: `env` in the process, a memory limit, a private ipc namespace.
  void write_spec(const std::vector<std::string>& env, std::optional<std::uint64_t> memory_limit = std::nullopt) {
    nlohmann::json spec = {{"ociVersion", "1.0.2"},
                           {"root", {{"path", "rootfs"}}},
                           {"process", {{"env", env}}},
                           {"mounts", nlohmann::json::array()},
                           {"linux", {{"namespaces", {{{"type", "ipc"}}, {{"type", "mount"}}}}}}};
    if (memory_limit) spec["linux"]["resources"]["memory"]["limit"] = *memory_limit;
    dir_.write("bundle/config.json", spec.dump());
  }

  // A process in a mount namespace of its own with a tmpfs of `size_mib` at <rootfs>/dev/shm.
  void start_container(unsigned size_mib) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    container_ = ::fork();
    ASSERT_GE(container_, 0);
    if (container_ == 0) {
      ::close(ready[0]);
      const std::string shm = (dir_ / "bundle/rootfs/dev/shm").string();
      const std::string opts = "size=" + std::to_string(size_mib) + "m";
      const bool ok = ::unshare(CLONE_NEWNS) == 0 &&
                      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                      ::mount("shm", shm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts.c_str()) == 0;
      const char c = ok ? 'y' : 'n';
      (void)!::write(ready[1], &c, 1);
      ::pause();
      ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(c, 'y') << "could not make the container's namespace and tmpfs";
  }

  // The container's /dev/shm size, read through its mount namespace.
  std::uint64_t container_shm_size() const {
    const std::string path =
        "/proc/" + std::to_string(container_) + "/root" + (dir_ / "bundle/rootfs/dev/shm").string();
    struct statvfs st {};
    EXPECT_EQ(::statvfs(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
    return static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
  }

  std::string state(int pid) const {
    return nlohmann::json{{"ociVersion", "1.0.2"},
                          {"id", "hooktest"},
                          {"pid", pid},
                          {"status", "created"},
                          {"bundle", (dir_ / "bundle").string()}}
        .dump();
  }

  // Runs the hook in a forked child with `state_text` on its stdin.
  HookRun run(const std::string& state_text) const {
    int in[2], out[2];
    EXPECT_EQ(::pipe(in), 0);
    EXPECT_EQ(::pipe(out), 0);
    EXPECT_EQ(::write(in[1], state_text.data(), state_text.size()), static_cast<ssize_t>(state_text.size()));
    ::close(in[1]);
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(out[0]);
      HookOptions o;
      o.config = (dir_ / "config.json").string();
      o.stage = "createRuntime";
      o.state_fd = in[0];
      o.sandbox = false;  // the sandbox is tested in sandbox_test and under the real runtimes
      o.decision_dir = decision_dir_.string();
      HookResult result{kExitFailure, ""};
      try {
        result = run_hook(o);
      } catch (const std::exception& e) {
        result.error_line = std::string("threw: ") + e.what();
      }
      (void)!::write(out[1], result.error_line.data(), result.error_line.size());
      ::_exit(result.exit_code);
    }
    ::close(in[0]);
    ::close(out[1]);
    HookRun r;
    char buf[4096];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) r.error_line.append(buf, static_cast<std::size_t>(n));
    ::close(out[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  std::string log() const {
    std::ifstream in(dir_ / "gpu-run.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  test::TempDir dir_;
  fs::path decision_dir_ = dir_ / "decisions";
  pid_t container_ = -1;
};

TEST_F(HookTest, AMalformedStateFailsWithOneLineAndALogLine) {
  write_spec({});
  const HookRun r = run("{\"id\": ");
  EXPECT_EQ(r.rc, kExitFailure);
  EXPECT_FALSE(r.error_line.empty());
  EXPECT_EQ(r.error_line.find('\n'), std::string::npos) << r.error_line;
  EXPECT_CONTAINS(log(), "stage=createRuntime action=fail");
}

TEST_F(HookTest, AContainerThatAskedNothingIsLeftAlone) {
  SKIP_UNLESS(::geteuid() == 0, "needs root for a mount namespace (CI runs as root)");
  write_spec({"PATH=/bin"});
  start_container(64);
  const HookRun r = run(state(container_));
  EXPECT_EQ(r.rc, kExitOk) << r.error_line;
  EXPECT_EQ(container_shm_size(), 64 * kMiB);
}

TEST_F(HookTest, AnExplicitSizeOverTheBudgetFailsTheStartAsAtEveryDoor) {
  write_spec({"GPU_RUN_SHM_SIZE=600m"}, kGiB);
  const HookRun r = run(state(::getpid()));
  EXPECT_EQ(r.rc, kExitFailure);
  EXPECT_CONTAINS(r.error_line,
                  "container hooktest: shm-size 600MiB does not fit the memory limit 1GiB (shm pages count against "
                  "it; at most 50% = 512MiB may be shm): raise the memory limit to at least 1200m or ask for less");
  EXPECT_CONTAINS(log(), "container=hooktest stage=createRuntime action=fail source=env");
}

TEST_F(HookTest, GrowsTheContainersShmInItsMountNamespace) {
  SKIP_UNLESS(::geteuid() == 0, "needs root for a mount namespace (CI runs as root)");
  write_spec({"GPU_RUN_SHM_SIZE=200m"}, 2 * kGiB);
  start_container(64);
  const HookRun r = run(state(container_));
  EXPECT_EQ(r.rc, kExitOk) << r.error_line;
  EXPECT_EQ(container_shm_size(), 200 * kMiB);
  EXPECT_CONTAINS(log(), "action=resized source=env");
  EXPECT_CONTAINS(log(), "before=64m after=200m");
  // Its decision, once, where the guard reads it: the state file keyed by the container's id.
  const Recorded rec = read_recorded({nullptr, nullptr, nullptr, "hooktest", dir_ / "decisions"});
  ASSERT_TRUE(rec.record) << rec.error;
  EXPECT_EQ(rec.where, "hook state file");
  EXPECT_EQ(rec.record->door, "gpu-run-hook");
  EXPECT_EQ(rec.record->size, 200 * kMiB);
  // ...within its budget: half of the 2 GiB limit.
  EXPECT_EQ(rec.record->ceiling, kGiB);
}

// Issue 40: /run is a tmpfs emptied at boot and nothing made /run/gpu-run again, so the hook
// sized the container but logged "cannot keep the decision record", and the guard and doctor had
// none. On a fresh /run (an empty directory here, standing for it) the hook makes /run/gpu-run
// 0755 and its decisions/ 0700, and keeps the record.
TEST_F(HookTest, KeepsItsRecordOnAFreshRunAfterABoot) {
  SKIP_UNLESS(::geteuid() == 0, "needs root for a mount namespace (CI runs as root)");
  const fs::path fresh_run = dir_ / "run";
  fs::create_directory(fresh_run);
  decision_dir_ = fresh_run / "gpu-run" / "decisions";
  const mode_t old_umask = ::umask(077);  // the mode is the hook's, not its caller's umask
  write_spec({"GPU_RUN_SHM_SIZE=200m"}, 2 * kGiB);
  start_container(64);
  const HookRun r = run(state(container_));
  ::umask(old_umask);
  EXPECT_EQ(r.rc, kExitOk) << r.error_line;
  EXPECT_EQ(log().find("cannot keep the decision record"), std::string::npos) << log();
  struct stat st {};
  ASSERT_EQ(::stat((fresh_run / "gpu-run").c_str(), &st), 0) << "no " << (fresh_run / "gpu-run");
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(::stat(decision_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  const Recorded rec = read_recorded({nullptr, nullptr, nullptr, "hooktest", decision_dir_});
  ASSERT_TRUE(rec.record) << rec.error;
  EXPECT_EQ(rec.record->size, 200 * kMiB);
}

// gpu-run-hook's door: a container that names an unreadable profile file (a link to itself) fails
// its start (exit 1: gpu-run-hook(1), EXIT STATUS) with one line naming the file and the errno's words.
TEST_F(HookTest, AnUnreadableProfileFailsTheStartWithItsErrno) {
  fs::create_directories(dir_ / "profiles");
  fs::create_symlink("loop.json", dir_ / "profiles/loop.json");
  dir_.write("config.json", nlohmann::json{{"log_file", (dir_ / "gpu-run.log").string()},
                                           {"profile_dirs", {(dir_ / "profiles").string()}}}
                                .dump());
  write_spec({"GPU_RUN_PROFILE=loop"});
  const HookRun r = run(state(::getpid()));
  EXPECT_EQ(r.rc, kExitFailure);
  EXPECT_CONTAINS(r.error_line, (dir_ / "profiles/loop.json").string() + ": cannot open: " + std::strerror(ELOOP));
  EXPECT_EQ(r.error_line.find('\n'), std::string::npos) << r.error_line;
}

TEST_F(HookTest, AStateWithoutAPidFailsAnExplicitRequest) {
  write_spec({"GPU_RUN_SHM_SIZE=200m"});
  const HookRun r = run(state(0));
  EXPECT_EQ(r.rc, kExitFailure);
  EXPECT_CONTAINS(r.error_line, "pid");
}

// The contract table as the hook reads it: every fact under each name a container may give it
// (its environment name, the name's alias, its annotation in the state or the spec) sizes the
// container's /dev/shm the same, which differs from not giving it.
TEST_F(HookTest, EveryNameOfAFactSizesTheSame) {
  SKIP_UNLESS(::geteuid() == 0, "needs root for a mount namespace (CI runs as root)");
  using Keys = std::map<std::string, std::string>;
  auto size_of = [&](const Keys& env, const Keys& spec_annotations, const Keys& state_annotations) {
    std::vector<std::string> envs;
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    write_spec(envs);
    if (!spec_annotations.empty()) {
      nlohmann::json spec = nlohmann::json::parse(test::read_text(dir_ / "bundle/config.json"));
      spec["annotations"] = spec_annotations;
      dir_.write("bundle/config.json", spec.dump());
    }
    start_container(64);
    nlohmann::json st = nlohmann::json::parse(state(container_));
    if (!state_annotations.empty()) st["annotations"] = state_annotations;
    const HookRun r = run(st.dump());
    EXPECT_EQ(r.rc, kExitOk) << r.error_line;
    const std::uint64_t size = container_shm_size();
    ::kill(container_, SIGKILL);
    ::waitpid(container_, nullptr, 0);
    container_ = -1;
    return size;
  };
  const std::map<RequestKey, std::string> value = {{RequestKey::kProfile, "imagenet"},
                                                   {RequestKey::kGpus, "2"},
                                                   {RequestKey::kWorkers, "8"},
                                                   {RequestKey::kBatchSize, "128"},
                                                   {RequestKey::kShmSize, "3g"}};
  for (const RequestKeySpec& k : kRequestKeys) {
    Keys base = {{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_GPUS", "2"}};
    base.erase(k.env);
    const std::uint64_t without = size_of(base, {}, {});
    Keys by_env = base;
    by_env[k.env] = value.at(k.key);
    const std::uint64_t want = size_of(by_env, {}, {});
    EXPECT_NE(want, without) << k.name << ": the test's value must change the size";
    EXPECT_EQ(size_of(base, {{k.annotation, value.at(k.key)}}, {}), want) << k.annotation << " in the spec";
    EXPECT_EQ(size_of(base, {}, {{k.annotation, value.at(k.key)}}), want) << k.annotation << " in the state";
    if (k.env_alias) {
      Keys by_alias = base;
      by_alias[k.env_alias] = value.at(k.key);
      EXPECT_EQ(size_of(by_alias, {}, {}), want) << k.env_alias;
    }
  }
}

// The command line's workers, read from the spec's process.args: in the host log and the record.
TEST_F(HookTest, TheCommandLinesWorkersAreLoggedAndRecorded) {
  SKIP_UNLESS(::geteuid() == 0, "needs root for a mount namespace (CI runs as root)");
  write_spec({"GPU_RUN_PROFILE=imagenet"});
  nlohmann::json spec = nlohmann::json::parse(test::read_text(dir_ / "bundle/config.json"));
  spec["process"]["args"] = {"python", "train.py", "--workers", "6"};
  dir_.write("bundle/config.json", spec.dump());
  start_container(64);
  const HookRun r = run(state(container_));
  EXPECT_EQ(r.rc, kExitOk) << r.error_line;
  EXPECT_CONTAINS(log(), "action=warn warning=");
  EXPECT_CONTAINS(log(), "the command line's '--workers 6' asks for 6 DataLoader workers");
  const Recorded rec = read_recorded({nullptr, nullptr, nullptr, "hooktest", dir_ / "decisions"});
  ASSERT_TRUE(rec.record) << rec.error;
  EXPECT_EQ(rec.record->command_flag, "--workers 6");
  EXPECT_EQ(rec.record->command_workers, 6u);
}

TEST(HookArgsTest, RemountModeTakesItsOwnArguments) {
  const char* argv[] = {"gpu-run-hook", "--remount", "42", "1048576", "--host-dev", "9"};
  const HookOptions o = parse_hook_args(6, const_cast<char**>(argv));
  ASSERT_TRUE(o.remount);
  EXPECT_EQ(o.remount->pid, 42);
  EXPECT_EQ(o.remount->size, 1048576u);
  EXPECT_EQ(o.remount->host_dev, dev_t{9});
  const char* bad[] = {"gpu-run-hook", "--remount", "42"};
  EXPECT_CONTAINS(error_of([&] { parse_hook_args(3, const_cast<char**>(bad)); }), "expected PID and BYTES");
  const char* hook[] = {"gpu-run-hook", "createRuntime"};
  EXPECT_FALSE(parse_hook_args(2, const_cast<char**>(hook)).remount);
}

// The remount mode reports on its descriptor even when it fails: a pid no process has.
TEST(HookArgsTest, RemountModeReportsAFailureAsJson) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int code = run_remount(RemountRequest{0x3ffffff0, 64 << 20, false, std::nullopt}, fds[1]);
  ::close(fds[1]);
  char buf[1024] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  EXPECT_NE(code, 0);
  const RemountOutcome o = parse_remount_report(buf, "", code, "gpu-run-hook");
  EXPECT_FALSE(o.result);
  EXPECT_CONTAINS(o.error, "1073741808");
}

}  // namespace
}  // namespace gpurun
