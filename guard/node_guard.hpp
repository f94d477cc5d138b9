#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "decision/config.hpp"
#include "decision/growth_limits.hpp"
#include "decision/sizing.hpp"
#include "guard/container_admission.hpp"
#include "oci/container.hpp"
#include "profiles/profile.hpp"

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

// What the guard watches, for its first line: "guarding the docker containers gpu-run sized"
// (with --all: "guarding every running docker container").
std::string guard_start_line(const std::string& engine, bool all);

// Runs the node guard with the host `config` until SIGTERM or SIGINT.
void run_guard(const GuardOptions& options, const Config& config);

}  // namespace gpurun
