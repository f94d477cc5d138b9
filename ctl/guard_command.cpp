// `gpu-run-ctl guard`: the command's options and help; the node guard itself is guard/.
#include "ctl/guard_command.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "base/stop_signal.hpp"
#include "ctl/ctl_common.hpp"
#include "guard/node_guard.hpp"

namespace gpurun {
namespace {

// What guard watches and the policy it applies.
constexpr const char* kGuardFooter =
    "The node-wide gpu-run --guard (the same policy, the config's \"guard\" knobs, and the same host log\n"
    "lines): guards the engine's running containers gpu-run sized (a gpu-run.decision record, or a\n"
    "gpu-run.profile or gpu-run.shm-size label or annotation, GPU_RUN_PROFILE or GPU_RUN_SHM_SIZE; every one\n"
    "with --all) as they start, and samples each one's /dev/shm. Instead of polling, it watches with\n"
    "inotify the directories where the runtime writes each container's pid. --engine docker: the tasks of\n"
    "dockerd's containerd (found from dockerd's and containerd's flags and configs); podman: its store's run\n"
    "root (podman info); containerd: its task directories (--containerd-state), Kubernetes' pods and Docker's\n"
    "containers, a pod's series labelled with namespace, pod and container. Where docker's or podman's cannot\n"
    "be found, it says so and lists `<engine> ps` every 2 s instead. One guard a host (a second one exits 1).\n"
    "A container keeps the headroom its door recorded free (one batch per worker of every rank) and grows\n"
    "up to the recorded ceiling; one sized before the record with GPU_RUN_PROFILE, GPU_RUN_WORKERS and\n"
    "GPU_RUN_BATCH_SIZE is planned from them; any other keeps the config's min_free_fraction. Never beyond\n"
    "the profile's max_shm nor the memory budget of --memory, whatever a record says.\n"
    "Runs until SIGTERM or SIGINT (exit 0). Needs root. Packaged as gpu-run-guard.service (not enabled).\n"
    "A pod's memory-backed emptyDir is never made smaller, nor grown past its sizeLimit (GPU_RUN_SHM_LIMIT).\n"
    "--metrics ADDR serves GET /metrics (Prometheus text): each guarded container's /dev/shm size, used and\n"
    "peak bytes, growths and refused growths, the bytes of its orphaned engine segments\n"
    "(gpu_run_shm_orphaned_bytes), the guard's version and its loops' last passes; GET /healthz\n"
    "(503 when the sampler or the discovery has made no pass in 3 of its periods, at least 10 s) and /readyz\n"
    "(503 also until both have made one). ADDR: 127.0.0.1:PORT, [::1]:PORT or unix:/PATH; another\n"
    "address only with --metrics-public (plain HTTP, no authentication). Needs gpu-run-metrics-http.so.";

}  // namespace

void add_guard_command(CLI::App& app) {
  auto o = std::make_shared<GuardOptions>();
  CLI::App* cmd = app.add_subcommand(
      "guard", "Grow the /dev/shm of every running container gpu-run sized before it fills, until SIGTERM");
  cmd->footer(kGuardFooter);
  cmd->add_option("--engine", o->engine,
                  "docker, podman or containerd (default: the config's engine); each one's containers are seen "
                  "as they start, in the directories its runtime writes their pids into (containerd's: "
                  "Kubernetes' pods and Docker's containers)")
      ->type_name("ENGINE");
  cmd->add_option("--containerd-state", o->containerd_state,
                  "containerd's state directory, where --engine containerd watches its tasks")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->add_flag("--all", o->all, "Guard every running container, not only those gpu-run sized");
  cmd->add_option("--interval", o->interval_ms, "Milliseconds between samples of each container")
      ->type_name("MS")
      ->capture_default_str();
  cmd->add_option("--metrics", o->metrics,
                  "Serve Prometheus metrics (and /healthz, /readyz) at ADDR: 127.0.0.1:PORT, [::1]:PORT or unix:/PATH")
      ->type_name("ADDR");
  cmd->add_flag("--metrics-public", o->metrics_public, "Allow --metrics on a non-loopback address (plain HTTP)");
  cmd->callback([o] {
    const NodeGuard guard(*o, load_ctl_config(), GuardClock::system());
    StopOnSignal signals;
    guard.run(stop_requested);
  });
}

}  // namespace gpurun
