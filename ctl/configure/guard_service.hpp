#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace gpurun {

// The node guard's systemd units (packaging/systemd/): one a host, so the podman one conflicts
// with the docker one (the guard holds /run/gpu-run/guard.lock).
inline constexpr const char* kGuardUnitDocker = "gpu-run-guard.service";
inline constexpr const char* kGuardUnitPodman = "gpu-run-guard-podman.service";

// Runs argv and returns its exit status; `output` gets its stdout and stderr. Tests pass a fake.
using CommandRunner = std::function<int(const std::vector<std::string>& argv, std::string& output)>;

// Runs argv through spawn (PATH looked up), output captured.
int run_command(const std::vector<std::string>& argv, std::string& output);

// What configure does about the node guard for `engine` ("docker" or "podman").
struct GuardServicePlan {
  std::string unit;               // the unit of that engine's guard
  std::vector<std::string> call;  // systemctl enable|disable --now UNIT
  std::string command;            // the same, for a person to run
  std::string without_systemd;    // the one command to run where there is no systemd
};

// Pure: `enable` true for configure, false for --undo.
GuardServicePlan guard_service_plan(const std::string& engine, bool enable);

// Turns the guard on (`enable`) or off through systemd when `systemd_dir` (/run/systemd/system,
// sd_booted's test) exists, else says the one command to run. Prints one line of what it did;
// with `dry_run` only what it would run. A systemctl that fails is a warning naming the command
// (configure's own files are written by then): returns false.
bool apply_guard_service(const std::string& engine, bool enable, bool dry_run, const CommandRunner& run = run_command,
                         const std::filesystem::path& systemd_dir = "/run/systemd/system");

}  // namespace gpurun
