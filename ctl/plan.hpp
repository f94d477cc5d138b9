#pragma once

#include <optional>
#include <string>

#include "base/env.hpp"
#include "decision/config.hpp"
#include "decision/sizing.hpp"
#include "engine/sizing_flags.hpp"
#include "oci/host.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl plan`: the /dev/shm plan for a job, and how it was reached, running nothing.
struct PlanOptions {
  SizingFlags sizing;
  std::optional<std::string> memory;  // the container's memory limit, Docker's syntax
  std::optional<std::string> cpus;    // CPUs of the machine the job will run on
  bool json = false;
};

// Plans without side effects, exactly as gpu-run would for the same flags. `host` is the
// machine probed; --cpus replaces its CPU count (the job may run elsewhere). Throws Error
// (exit 2) naming the flag on bad input; a plan that does not fit is returned with `problem` set.
ShmPlan make_plan(const PlanOptions& options, const Config& config, HostInfo host, const EnvLookup& env = process_env);

// The plan as `plan` prints it: explain()'s breakdown, then "=> /dev/shm SIZE" with what gpu-run
// passes, or that it starts nothing when the plan does not fit (the problem is left to run_plan's
// error, so that a terminal shows it once).
std::string plan_text(const ShmPlan& plan);

// Prints the plan (text or --json) on stdout; throws Error (exit 2) with the one-line
// problem after printing when it does not fit.
void run_plan(const PlanOptions& options);

// Registers `plan` on `app`.
void add_plan_command(CLI::App& app);

}  // namespace gpurun
