#include "wrapper/wrapper.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/program.hpp"
#include "engine/record.hpp"

namespace gpurun {

std::string invocation_json(const EngineInvocation& inv) {
  nlohmann::json j;
  j["plan"] = plan_to_json(inv.plan, kFlagWords);
  j["engine"] = inv.engine;
  j["argv"] = inv.argv;
  j["applied_shm_bytes"] = inv.applied_shm;
  j["sized"] = inv.sized;
  j["warnings"] = inv.warnings;
  return j.dump(2);
}

std::string wrapper_help() {
  return R"(Usage: gpu-run [gpu-run options] [docker run options] IMAGE [COMMAND [ARG...]]

Runs a container with /dev/shm sized for its PyTorch DataLoader: computes the size
from a profile and the job, adds --shm-size, the GPU request, labels and env, and
execs `docker run` (or `podman run`). Every option not listed here goes to the
engine untouched.

gpu-run options:
  --profile NAME|FILE.json  workload profile (default: the host's default_profile, else "default")
  --gpus N|all|device=0,1   GPU ranks, Docker's syntax (default and 0: one loader, no GPU request)
  --workers N               DataLoader workers per GPU (default: the profile's, or from the CPUs);
                            the script must start as many (read GPU_RUN_WORKERS)
  --batch-size N            batch size per GPU
  --prefetch-factor N       DataLoader prefetch_factor
  --profile-dir DIR         look for profiles in DIR first (repeatable)
  --engine docker|podman    container engine (default: the config's engine, docker)
  --gpu-request docker|cdi|none
                            how --gpus reaches the engine: --gpus, CDI --device, or not at all
                            (none: no GPU in the container, a pinned loader is planned unpinned)
  --dry-run                 print the engine command, shell-quoted, and start nothing
  --explain                 print the sizing breakdown on stderr, then run
  --json                    print the plan and the engine argv as JSON and start nothing
  --record                  run the engine as a child, sample the container's peak /dev/shm use
                            and append a record to the performance log (config perf_log,
                            default $XDG_STATE_HOME/gpu-run/perf.jsonl); exits with the engine's code
  --guard                   run the engine as a child, sample its /dev/shm at 100 Hz and grow it
                            in place before it fills (one batch per worker kept free, up to the
                            profile's max_shm and the memory budget); needs root, not with -d;
                            appends its record too (gpu-run-ctl profiles learn reads them)
  --timeline FILE.svg       with --record or --guard: also draw /dev/shm size and use over time
  --over-budget             keep an explicit --shm-size over the memory budget of --memory (a person
                            chose it): warned, and labelled gpu-run.over-budget=chosen
With --record or --guard, a job that exits 135 (SIGBUS) or fills /dev/shm is told the
peak, the size, a size that would have fitted and the command to rerun with.
  --help, --version

A request key given to the engine with -e (or its long form, or an env file): GPU_RUN_PROFILE,
GPU_RUN_GPUS, GPU_RUN_WORKERS or its alias GPU_RUN_NUM_WORKERS, GPU_RUN_BATCH_SIZE, GPU_RUN_SHM_SIZE,
is read as its flag; one key with two values is refused.

The container gets GPU_RUN_PROFILE, GPU_RUN_GPUS (with --gpus), GPU_RUN_WORKERS (also as
GPU_RUN_NUM_WORKERS), GPU_RUN_BATCH_SIZE and GPU_RUN_SHM_SIZE in its environment and the labels
gpu-run.profile, gpu-run.gpus and gpu-run.shm-size (no size when the container uses the host's
/dev/shm), and gpu-run.decision: what gpu-run decided, as JSON, which gpu-run-ctl guard reads.
An explicit --shm-size (or --tmpfs /dev/shm:size=SIZE) wins; --memory bounds the plan (shm pages count against it).
Config: /etc/gpu-run/config.json or $GPU_RUN_CONFIG. Profiles: gpu-run-ctl profiles list.
)";
}

int run_wrapper(const WrapperOptions& o) {
  if (o.help) {
    std::cout << wrapper_help();
    return kExitOk;
  }
  if (o.version) {
    std::cout << "gpu-run " << GPU_RUN_VERSION << "\n";
    return kExitOk;
  }
  Config config = load_config(config_path(std::nullopt));
  HostInfo host = probe_host();
  for (const auto& why : host.unread) print_warning("gpu-run", "host probe: " + why + " (sized without it)");
  EngineInvocation inv = prepare_run(o, config, host);
  for (const auto& w : inv.warnings) print_warning("gpu-run", w);
  if (o.explain) std::cerr << explain(inv.plan, kFlagWords) << explain_outcome(inv);
  if (o.json) {
    std::cout << invocation_json(inv) << "\n";
    return kExitOk;
  }
  if (o.dry_run) {
    std::string line;
    for (const auto& arg : inv.argv) line += (line.empty() ? "" : " ") + shell_quote(arg);
    std::cout << line << "\n";
    return kExitOk;
  }
  if (o.record || o.guard) return run_recorded(inv, o, config);
  std::vector<char*> argv;
  for (auto& arg : inv.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(argv[0], argv.data());
  int err = errno;
  throw Error("cannot run " + inv.engine + ": " + std::strerror(err) +
                  (err == ENOENT ? " (is it installed and on PATH? or use --engine)" : ""),
              err, 127);
}

}  // namespace gpurun
