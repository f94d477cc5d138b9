#include "ctl/plan.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/run_options.hpp"
#include "decision/config.hpp"
#include "engine/run_args.hpp"

namespace gpurun {

ShmPlan make_plan(const PlanOptions& o, const Config& config, HostInfo host, const EnvLookup& env) {
  // --memory and --cpus stand for the engine options `docker run` would be given.
  EngineOptionFacts limits;
  limits.memory = o.memory;
  limits.cpus = o.cpus;
  // --cpus describes the machine the job will run on, so this machine's count must not bound it.
  if (o.cpus) host.cpus = std::numeric_limits<unsigned>::max();
  HostFacts facts = node_host_facts(host);
  facts.gpus_counted = false;  // the job may run on another machine: its GPUs are not these
  return plan_from_flags(o.sizing, limits, config, facts, env);
}

std::string plan_text(const ShmPlan& plan) {
  if (plan.fits())
    return explain(plan, kFlagWords) + "=> /dev/shm " + format_size(plan.shm) + " (gpu-run passes --shm-size " +
           engine_size(plan.shm) + ")\n";
  // The problem is run_plan's error line on stderr (require_fits): said here too, a terminal shows it twice.
  ShmPlan shown = plan;
  shown.refusal.reset();
  return explain(shown, kFlagWords) + "=> /dev/shm " + format_size(plan.shm) +
         " does not fit: gpu-run starts nothing with these flags (the error below says what to change)\n";
}

void run_plan(const PlanOptions& o) {
  const ShmPlan plan = make_plan(o, load_ctl_config(), probe_host());
  if (o.json)
    std::cout << plan_to_json(plan, kFlagWords).dump(2) << "\n";
  else
    std::cout << plan_text(plan);
  std::cout.flush();
  require_fits(plan, kFlagWords);
}

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Print the /dev/shm plan for a job and its breakdown; runs nothing");
  cmd->footer(
      "Sizes exactly as `gpu-run` would with the same flags. Exit status 2 (with the problem on\n"
      "stderr, after the plan) when the plan does not fit --memory or the profile's max_shm.");
  add_sizing_flags(*cmd, o->sizing);
  cmd->add_option("--memory", o->memory,
                  "The container's memory limit, Docker's syntax (e.g. 16g); checks the plan fits")
      ->type_name("SIZE");
  cmd->add_option("--cpus", o->cpus, "CPUs the job may use, for workers_per_gpu \"auto\" (default: this machine's)")
      ->type_name("N");
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace gpurun
