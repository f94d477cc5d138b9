#include "plan.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "ctl_common.hpp"
#include "error.hpp"
#include "invocation.hpp"
#include "run_args.hpp"
#include "units.hpp"

namespace gpurun {

ShmPlan make_plan(const PlanOptions& o, const Config& config, HostInfo host, const EnvLookup& env) {
  WrapperOptions wo;
  wo.gpus = o.gpus;
  wo.workers = o.workers;
  wo.batch_size = o.batch_size;
  wo.prefetch_factor = o.prefetch_factor;
  EngineOptionFacts facts;
  facts.memory = o.memory;
  facts.cpus = o.cpus;
  // --cpus describes the machine the job will run on, so this machine's count must not bound it.
  if (o.cpus) host.cpus = std::numeric_limits<unsigned>::max();
  const SizingRequest request = sizing_request_from(wo, facts, config, host);
  const ProfileStore store = ctl_store(o.profile_dirs, config, env);
  const Profile profile = store.load(o.profile.value_or(config.default_profile.value_or("default")), true);
  return plan_shm(profile, request);
}

void run_plan(const PlanOptions& o) {
  const ShmPlan plan = make_plan(o, load_ctl_config(), probe_host());
  if (o.json) {
    std::cout << plan_to_json(plan).dump(2) << "\n";
  } else {
    std::cout << explain(plan);
    std::cout << "=> /dev/shm " << format_size(plan.shm) << " (gpu-run passes --shm-size " << engine_size(plan.shm)
              << ")\n";
  }
  std::cout.flush();
  require_fits(plan);
}

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Print the /dev/shm plan for a job and its breakdown; runs nothing");
  cmd->footer(
      "Sizes exactly as `gpu-run` would with the same flags. Exit status 2 (with the problem on\n"
      "stderr, after the plan) when the plan does not fit --memory or the profile's max_shm.");
  cmd->add_option("--profile", o->profile,
                  "Profile name or path to a .json file (default: the host's default_profile, else \"default\")")
      ->type_name("NAME");
  cmd->add_option("--gpus", o->gpus, "GPU ranks, Docker's syntax: N, all, device=0,1 (default: none, one loader)")
      ->type_name("N");
  cmd->add_option("--workers", o->workers, "DataLoader workers per GPU (default: the profile's, or from the CPUs)")
      ->type_name("N");
  cmd->add_option("--batch-size", o->batch_size, "Batch size per GPU (default: the profile's)")->type_name("N");
  cmd->add_option("--prefetch-factor", o->prefetch_factor, "DataLoader prefetch_factor (default: the profile's)")
      ->type_name("N");
  cmd->add_option("--memory", o->memory,
                  "The container's memory limit, Docker's syntax (e.g. 16g); checks the plan fits")
      ->type_name("SIZE");
  cmd->add_option("--cpus", o->cpus, "CPUs the job may use, for workers_per_gpu \"auto\" (default: this machine's)")
      ->type_name("N");
  cmd->add_option("--profile-dir", o->profile_dirs, "Look for profiles in DIR first (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false);
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace gpurun
