#include "doctor.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config.hpp"
#include "contract.hpp"
#include "ctl_common.hpp"
#include "doctor_probe.hpp"
#include "doctor_render.hpp"
#include "doctor_rules.hpp"
#include "error.hpp"

namespace gpurun {

DoctorFacts gather_facts(const DoctorOptions& o) {
  const Config config = load_ctl_config();
  DoctorFacts f;
  f.memory_fraction_max = config.memory_fraction_max;
  if (o.container) {
    if (o.container->empty()) throw Error("doctor: the CONTAINER argument is empty: give a container name or id");
    gather_from_host(o.engine.value_or(config.engine), *o.container, f);
  } else {
    if (o.engine)
      throw Error("doctor: --engine " + *o.engine +
                  " names the engine of a CONTAINER argument: give the container, or run doctor inside it without "
                  "--engine");
    gather_inside(f);
  }
  return f;
}

int run_doctor(const DoctorOptions& o) {
  const DoctorFacts facts = gather_facts(o);
  const std::vector<Finding> findings = diagnose(facts);
  if (o.json)
    std::cout << doctor_json(facts, findings).dump(2) << "\n";
  else
    std::cout << format_findings(facts, findings);
  std::cout.flush();
  return doctor_exit_code(findings);
}

void add_doctor_command(CLI::App& app) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand("doctor",
                                     "Check /dev/shm for PyTorch DataLoader and NCCL: inside a "
                                     "container, or a running docker/podman container");
  std::ostringstream footer;
  footer << "Without CONTAINER it checks the container it runs in. With CONTAINER it inspects it once and reads\n"
         << "its /dev/shm through /proc/PID/root on the host (root needed; nothing is started in the container).\n"
         << "Checks: /dev/shm size against the engines' 64MiB default, its use, the ipc mode, the memory limit\n"
         << "against the shm size, " << kEnvShmSize << "/" << kEnvProfile << " against the size applied, "
         << kEnvNumWorkers << "\n"
         << "against the CPUs, leftover torch_* and nccl-* segments, kernel.shmmax/shmall (which do not size\n"
         << "/dev/shm). Exit status: the worst finding, 0 OK, 3 WARN, 4 FAIL; 1 when doctor could not check,\n"
         << "2 a wrong request (bad option, unknown or stopped container).";
  cmd->footer(footer.str());
  cmd->add_option("CONTAINER", o->container, "Name or id of a running container (default: the one doctor runs in)");
  cmd->add_option("--engine", o->engine, "Engine of CONTAINER (default: the config's engine, else docker)")
      ->type_name("ENGINE")
      ->check(CLI::IsMember({"docker", "podman"}));
  cmd->add_flag("--json", o->json, "Print the facts and findings as JSON");
  cmd->callback([o] {
    const int code = run_doctor(*o);
    if (code != kExitOk)
      throw Error(std::string("doctor: worst finding ") +
                      level_name(code == kDoctorExitFail ? Level::kFail : Level::kWarn) + " (exit " +
                      std::to_string(code) + ")",
                  0, code);
  });
}

}  // namespace gpurun
