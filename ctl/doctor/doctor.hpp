#pragma once

#include <optional>
#include <string>

#include "ctl/doctor/doctor_facts.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl doctor`: checks a container's /dev/shm against what PyTorch DataLoader and NCCL
// need, inside the container (no argument) or from the host for a running container. The
// command over doctor_probe (facts), doctor_rules (findings) and doctor_render (the report).
struct DoctorOptions {
  std::optional<std::string> container;  // name or id; none: this process's own container
  std::optional<std::string> engine;     // docker | podman; default: the config's engine
  std::optional<std::string> log;        // --log FILE|-: read a crashed job's log instead
  std::optional<std::string> for_door;   // --for docker|podman|k8s: where the logged job ran
  bool json = false;
  std::string color = "auto";  // --color auto|always|never: the levels of the text report (use_color)
  std::string daemon_json = "/etc/docker/daemon.json";            // on the host: the engines' runtime
  std::string containerd_config = "/etc/containerd/config.toml";  // entries, for the runtime chain
};

// Reads a log for --log: the file, or standard input for "-", at most its last 64 MiB (where
// a crash is). Throws Error naming the file.
std::string read_log(const std::string& path);

// Prints the report (text or --json) and returns doctor's exit code.
int run_doctor(const DoctorOptions& options);

// Registers `doctor` on `app`.
void add_doctor_command(CLI::App& app);

}  // namespace gpurun
