#pragma once

// What a container's command line says about its DataLoader workers, read wherever a door can
// see it (gpu-run's COMMAND, a spec's process.args, a pod's command and args), and the one line
// every door shows when it starts another number than the plan holds.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "decision/shm_decision.hpp"

namespace gpurun {

// A DataLoader worker count the container's command line gives: `-j N`, `-jN`, `--workers N`,
// `--num-workers N`, `--num_workers N`, `--dataloader-num-workers N` (and `--flag=N`), as
// written, and N. Each argument is read word by word (a shell's `-c "python train.py -j 4"`);
// the last one wins, as with argparse. gpu-run only reads it: a script's DataLoader is its own.
struct CommandWorkers {
  std::string flag;  // "-j 4", "--workers=4"
  std::uint64_t workers = 0;
  bool operator==(const CommandWorkers& o) const { return flag == o.flag && workers == o.workers; }
};
std::optional<CommandWorkers> command_worker_flag(const std::vector<std::string>& command);

// When `spec.args` start another number of DataLoader workers than `plan` holds: one line with
// both sizes (the other count re-planned with `request`) and the two ways to agree, in the
// request's words (RequestWords::set_workers). Empty when they agree or the line says nothing.
std::string command_workers_warning(const ContainerRequest& request, const ShmPlan& plan, const SpecFacts& spec,
                                    const Config& config, const ProfileStore& store, const HostFacts& host);

}  // namespace gpurun
