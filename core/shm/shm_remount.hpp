#pragma once

// The act step of resizing a running container's /dev/shm, shared by gpu-run-ctl resize and the
// guards. It runs in a process of its own, gpu-run-hook's remount mode
// (`gpu-run-hook --remount PID BYTES [--allow-shrink] [--host-dev DEV]`): setns is irreversible
// for a process, and the callers have threads, so the helper is exec'd (spawn, process.hpp) and
// reports one JSON line on stdout (docs/ARCHITECTURE.md, "Remounting a running container").

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/program_path.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {

// What to remount: the /dev/shm of the container whose init is `pid`, at `size` (below the
// current one only with `allow_shrink`), refused when it is the host's (`host_dev`).
struct RemountRequest {
  int pid = 0;
  std::uint64_t size = 0;
  bool allow_shrink = false;
  std::optional<dev_t> host_dev;
};

// The helper's arguments after `--remount`: PID BYTES [--allow-shrink] [--host-dev DEV], and back.
std::vector<std::string> remount_args(const RemountRequest& request);
RemountRequest parse_remount_args(const std::vector<std::string>& args);  // throws usage_error

// In the helper process only: opens the container's mount namespace, gives up every capability
// but the four the remount needs, installs the seccomp filter, joins the namespace and applies
// the size. Irreversible for the calling process.
ShmResult remount_shm_here(const RemountRequest& request);

// The helper's report, one JSON line: {"outcome","before","after"} or {"error","errno","exit_code"}.
std::string remount_report(const ShmResult& result);
std::string remount_report(const Error& error);

// What a helper's run says: the result, or the Error as the helper reported it. A run without a
// report (killed, crashed, not the helper) is an Error naming `helper`, its exit code and the
// first line of its stderr.
struct RemountOutcome {
  std::optional<ShmResult> result;
  std::string error;
  int err = 0;
  int exit_code = kExitFailure;
  // The result, or throws the Error.
  ShmResult get() const;
};
RemountOutcome parse_remount_report(const std::string& out, const std::string& err, int exit_code,
                                    const std::string& helper);

// How long a remount may take before its helper is killed (tens of ms on this machine: the
// exec, a setns and a mount(2)).
constexpr std::chrono::milliseconds kRemountDeadline{10000};

// Runs the helper (gpu-run-hook, base/program_path.hpp) and waits for it (at most `deadline`). Throws Error as the
// helper reported it, or when it cannot start or misses the deadline.
ShmResult remount_shm(const RemountRequest& request, const std::filesystem::path& helper = hook_program_path({}),
                      std::chrono::milliseconds deadline = kRemountDeadline);

}  // namespace gpurun
