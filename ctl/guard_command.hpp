#pragma once

namespace CLI {
class App;
}

namespace gpurun {

// Registers `gpu-run-ctl guard` (guard/node_guard.hpp's NodeGuard with the host's config, until SIGTERM or SIGINT).
void add_guard_command(CLI::App& app);

}  // namespace gpurun
