#include "ctl/configure/guard_service.hpp"

#include <iostream>

#include "base/error.hpp"
#include "base/process.hpp"
#include "base/program.hpp"

namespace gpurun {

int run_command(const std::vector<std::string>& argv, std::string& output) {
  const Captured c = run_capture(argv);
  output = c.out + c.err;
  return c.exit_code;
}

GuardServicePlan guard_service_plan(const std::string& engine, bool enable) {
  GuardServicePlan p;
  p.unit = engine == "podman" ? kGuardUnitPodman : kGuardUnitDocker;
  p.call = {"systemctl", enable ? "enable" : "disable", "--now", p.unit};
  for (const std::string& word : p.call) p.command += (p.command.empty() ? "" : " ") + word;
  p.without_systemd = enable ? "gpu-run-ctl guard --engine " + engine
                             : "stop the gpu-run-ctl guard --engine " + engine + " you started";
  return p;
}

bool apply_guard_service(const std::string& engine, bool enable, bool dry_run, const CommandRunner& run,
                         const std::filesystem::path& systemd_dir) {
  const GuardServicePlan p = guard_service_plan(engine, enable);
  std::error_code ec;
  // With --dry-run stdout is the file configure would write: the guard's line goes to stderr.
  std::ostream& out = dry_run ? std::cerr : std::cout;
  if (!std::filesystem::is_directory(systemd_dir, ec)) {
    out << (enable ? "the node guard (grows /dev/shm before it fills): no systemd here (no " + systemd_dir.string() +
                         "): keep it running with `" + p.without_systemd + "`"
                   : "the node guard: no systemd here: " + p.without_systemd)
        << "\n";
    return true;
  }
  if (dry_run) {
    out << "would run: " << p.command << " (the node guard; --no-guard leaves it)\n";
    return true;
  }
  std::string output;
  int status = -1;
  try {
    status = run(p.call, output);
  } catch (const Error& e) {
    output = e.what();
  }
  if (status != 0) {
    while (!output.empty() && output.back() == '\n') output.pop_back();
    print_warning("gpu-run-ctl",
                  "`" + p.command + "` " + (status < 0 ? "could not run" : "exited " + std::to_string(status)) +
                      (output.empty() ? std::string() : " (" + output.substr(0, 300) + ")") +
                      (enable ? ": the node guard is not running; run it again once " + p.unit +
                                    " is installed (packaging/systemd), or keep `" + p.without_systemd + "` running"
                              : ": stop the node guard yourself"));
    return false;
  }
  std::cout << (enable ? "started the node guard and enabled it at boot: " : "stopped the node guard: ") << p.command
            << "\n";
  return true;
}

}  // namespace gpurun
