#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "container.hpp"
#include "profile.hpp"
#include "shm_guard.hpp"
#include "sizing.hpp"

namespace CLI {
class App;
}

namespace gpurun {

struct Config;

// `gpu-run-ctl guard`: gpu-run --guard for every running container gpu-run sized (or every
// running container with --all), found by polling the engine, until SIGTERM or SIGINT.
struct GuardOptions {
  std::optional<std::string> engine;                 // default: the config's engine
  bool all = false;                                  // every running container, labelled or not
  std::string interval_ms = "10";                    // between two samples of each guarded container
  std::optional<std::string> metrics;                // ADDR of the Prometheus endpoint (metrics_server.hpp)
  bool metrics_public = false;                       // --metrics may be a non-loopback address
  std::string containerd_state = "/run/containerd";  // --engine containerd: where its tasks are
};

// The `<engine> ps -q` commands that list the candidates: one per label gpu-run puts on a
// container it sized (the engines AND their --filter flags), or one unfiltered with --all.
std::vector<std::vector<std::string>> guard_ps_commands(const std::string& engine, bool all);

// What the guard watches, for its first line: "guarding the docker containers gpu-run sized"
// (with --all: "guarding every running docker container").
std::string guard_start_line(const std::string& engine, bool all);

// Why a running container is not guarded (empty: it is): not running, or no /dev/shm of its
// own to grow (--ipc host, none, container:X), or (without --all) no gpu-run label.
std::string guard_skip_reason(const ContainerInfo& container, bool all);

// What the plan knows of a container gpu-run sized, from its GPU_RUN_* environment (the
// labels for the profile and the GPUs): profile, workers and batch size per rank, and the
// GPUs (ranks) of GPU_RUN_GPUS as the hook reads it (contract.hpp; 0: one rank); nullopt
// unless the first three are there and every one given is a count.
struct GuardPlanInputs {
  std::string profile;
  std::uint64_t workers = 0;
  std::uint64_t batch_size = 0;
  unsigned gpus = 0;
  SizingRequest request;  // core's sizing_request of the recorded request (recorded_request)
};
std::optional<GuardPlanInputs> guard_plan_inputs(const ContainerInfo& container, const Config& config = Config{});

// The limits of a container's growth: with plan inputs, the plan's (headroom of one batch per
// worker, max_shm, budget), the profile loaded by name through `load_profile`; otherwise (or
// when the profile cannot be loaded or planned) no headroom (the policy's fraction) and the
// memory budget of its --memory. `note` says which, for the line that starts guarding it.
GuardLimits container_guard_limits(const ContainerInfo& container, const Config& config,
                                   const std::function<Profile(const std::string&)>& load_profile, std::string* note);

void run_guard(const GuardOptions& options);

void add_guard_command(CLI::App& app);

}  // namespace gpurun
