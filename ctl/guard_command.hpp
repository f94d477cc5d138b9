#pragma once

namespace CLI {
class App;
}

namespace gpurun {

// Registers `gpu-run-ctl guard` (guard/node_guard.hpp's run_guard with the host's config).
void add_guard_command(CLI::App& app);

}  // namespace gpurun
