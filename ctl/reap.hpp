#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "shm/shm_orphans.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl reap [--delete] [CONTAINER|--host]`: the segments in a /dev/shm whose owners are
// gone (shm_orphans.hpp), listed with their sizes and families, and removed with --delete.
struct ReapOptions {
  std::optional<std::string> container;  // a running container's /dev/shm
  bool host = false;                     // the host's /dev/shm
  bool remove = false;                   // --delete
  std::optional<std::string> engine;     // docker | podman; default: the config's engine
  long min_age = 60;                     // seconds a segment must be unchanged to be an orphan
};

// The report for people: one row a segment of an engine (name, size, family, state), then the
// orphans' total and, after --delete, what was removed and what was kept.
std::string format_reap(const std::string& target, const OrphanReport& report, const ReapResult* result,
                        std::size_t others);

// Finds the /dev/shm (the container's through /proc/PID/root, refusing symlinks, or the host's),
// reads every process of the host, prints the report and with --delete reaps the orphans.
// Throws Error: exit 2 for a wrong request, 1 when the system fails or a process could not be read.
void run_reap(const ReapOptions& options);

// Registers `reap` on `app`.
void add_reap_command(CLI::App& app);

}  // namespace gpurun
