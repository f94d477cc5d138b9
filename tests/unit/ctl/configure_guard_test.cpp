#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ctl/configure/configure_docker.hpp"
#include "ctl/configure/configure_podman.hpp"
#include "ctl/configure/guard_service.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

// systemctl as configure calls it: every argv kept, the status given.
struct FakeSystemctl {
  std::vector<std::vector<std::string>> calls;
  int status = 0;
  std::string output;
  CommandRunner runner() {
    return [this](const std::vector<std::string>& argv, std::string& out) {
      calls.push_back(argv);
      out = output;
      return status;
    };
  }
};

using Argv = std::vector<std::string>;

TEST(GuardService, EachEngineHasItsUnitAndTheOneCommandWithoutSystemd) {
  const GuardServicePlan docker = guard_service_plan("docker", true);
  EXPECT_EQ(docker.call, (Argv{"systemctl", "enable", "--now", "gpu-run-guard.service"}));
  EXPECT_EQ(docker.command, "systemctl enable --now gpu-run-guard.service");
  EXPECT_EQ(docker.without_systemd, "gpu-run-ctl guard --engine docker");
  const GuardServicePlan podman = guard_service_plan("podman", false);
  EXPECT_EQ(podman.call, (Argv{"systemctl", "disable", "--now", "gpu-run-guard-podman.service"}));
}

TEST(GuardService, WithSystemdItEnablesAndStartsTheUnit) {
  test::TempDir systemd;
  FakeSystemctl fake;
  testing::internal::CaptureStdout();
  EXPECT_TRUE(apply_guard_service("docker", true, false, fake.runner(), systemd.path()));
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(fake.calls.size(), 1u);
  EXPECT_EQ(fake.calls[0], (Argv{"systemctl", "enable", "--now", "gpu-run-guard.service"}));
  EXPECT_NE(out.find("started the node guard"), std::string::npos) << out;
}

TEST(GuardService, WithoutSystemdItRunsNothingAndNamesTheCommand) {
  test::TempDir dir;
  FakeSystemctl fake;
  testing::internal::CaptureStdout();
  EXPECT_TRUE(apply_guard_service("podman", true, false, fake.runner(), dir / "no-systemd"));
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(fake.calls.empty());
  EXPECT_NE(out.find("no systemd here"), std::string::npos) << out;
  EXPECT_NE(out.find("`gpu-run-ctl guard --engine podman`"), std::string::npos) << out;
}

TEST(GuardService, AFailingSystemctlIsAWarningNamingTheCommand) {
  test::TempDir systemd;
  FakeSystemctl fake;
  fake.status = 5;
  fake.output = "Unit gpu-run-guard.service not found.\n";
  testing::internal::CaptureStderr();
  EXPECT_FALSE(apply_guard_service("docker", true, false, fake.runner(), systemd.path()));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("`systemctl enable --now gpu-run-guard.service` exited 5"), std::string::npos) << err;
  EXPECT_NE(err.find("Unit gpu-run-guard.service not found."), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line";
}

TEST(GuardService, DryRunOnlySaysWhatItWouldRun) {
  test::TempDir systemd;
  FakeSystemctl fake;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_TRUE(apply_guard_service("docker", true, true, fake.runner(), systemd.path()));
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fake.calls.empty());
  EXPECT_EQ(out, "") << "stdout is the file --print shows";
  EXPECT_NE(err.find("would run: systemctl enable --now gpu-run-guard.service"), std::string::npos) << err;
}

// configure docker itself, on a daemon.json of a temp directory: the guard on after it, off
// after --undo, left alone with --no-guard.
TEST(ConfigureDockerGuard, ConfigureEnablesUndoDisablesNoGuardLeavesIt) {
  test::TempDir dir;
  const fs::path runtime = dir.write_script("bin/gpu-run-runtime", "exit 0\n");
  const fs::path runc = dir.write_script("bin/runc", "exit 0\n");
  dir.write("config.json", "{}\n");
  dir.write("daemon.json", "{\"runtimes\": {\"runc\": {\"path\": \"" + runc.string() + "\"}}}\n");
  FakeSystemctl fake;
  ConfigureDockerOptions o;
  o.daemon_json = (dir / "daemon.json").string();
  o.runtime_path = runtime.string();
  o.config = (dir / "config.json").string();
  o.systemctl = fake.runner();
  o.systemd_dir = dir.path().string();  // a directory: systemd "runs"
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  run_configure_docker(o);
  o.undo = true;
  run_configure_docker(o);
  ConfigureDockerOptions left = o;
  left.undo = false;
  left.guard = false;
  run_configure_docker(left);
  left.undo = true;
  run_configure_docker(left);
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.calls[0], (Argv{"systemctl", "enable", "--now", "gpu-run-guard.service"}));
  EXPECT_EQ(fake.calls[1], (Argv{"systemctl", "disable", "--now", "gpu-run-guard.service"}));
}

TEST(ConfigurePodmanGuard, ConfigureEnablesThePodmanUnit) {
  test::TempDir dir;
  const fs::path hook = dir.write_script("bin/gpu-run-hook", "exit 0\n");
  dir.write("config.json", "{}\n");
  FakeSystemctl fake;
  ConfigurePodmanOptions o;
  o.hooks_dir = (dir / "hooks.d").string();
  o.hook_path = hook.string();
  o.config = (dir / "config.json").string();
  o.systemctl = fake.runner();
  o.systemd_dir = dir.path().string();
  testing::internal::CaptureStdout();
  run_configure_podman(o);
  o.undo = true;
  run_configure_podman(o);
  testing::internal::GetCapturedStdout();
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.calls[0], (Argv{"systemctl", "enable", "--now", "gpu-run-guard-podman.service"}));
  EXPECT_EQ(fake.calls[1], (Argv{"systemctl", "disable", "--now", "gpu-run-guard-podman.service"}));
}

}  // namespace
}  // namespace gpurun
