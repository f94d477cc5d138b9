#include "ctl/doctor/doctor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/doctor/doctor_probe.hpp"
#include "ctl/doctor/doctor_render.hpp"
#include "ctl/doctor/doctor_rules.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"

namespace gpurun {

namespace {

constexpr std::size_t kMaxLogBytes = 64u << 20;

int report(const std::string& target, const std::vector<Finding>& findings, const nlohmann::json& json,
           const DoctorOptions& o) {
  if (o.json)
    std::cout << json.dump(2) << "\n";
  else
    std::cout << format_findings(target, findings, use_color(o.color, ::isatty(STDOUT_FILENO) == 1, process_env));
  std::cout.flush();
  return doctor_exit_code(findings);
}

int report_crash(const CrashFacts& crash, const DoctorOptions& o) {
  std::vector<Finding> findings = diagnose_crash(crash);
  put_workers_mismatch_first(crash, findings);
  return report(crash.source, findings, crash_json(crash, findings), o);
}

}  // namespace

std::string read_log(const std::string& path) {
  UniqueFd owned;
  int fd = STDIN_FILENO;
  if (path != "-") {
    owned = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!owned) throw system_error("doctor --log " + path, errno);
    struct stat st {};
    if (::fstat(owned.get(), &st) == 0 && S_ISDIR(st.st_mode))
      throw usage_error("doctor --log " + path + ": is a directory: give the log file");
    // A large regular file: only its end, where a crash is.
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxLogBytes)
      (void)::lseek(owned.get(), st.st_size - static_cast<off_t>(kMaxLogBytes), SEEK_SET);
    fd = owned.get();
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw system_error("doctor --log " + path + ": read", errno);
    }
    text.append(buf, static_cast<std::size_t>(n));
    // A pipe of any length: keep its last kMaxLogBytes.
    if (text.size() > 2 * kMaxLogBytes) text.erase(0, text.size() - kMaxLogBytes);
  }
  if (text.size() > kMaxLogBytes) text.erase(0, text.size() - kMaxLogBytes);
  return text;
}

int run_doctor(const DoctorOptions& o) {
  const Config config = load_ctl_config();
  if (o.log) {
    if (o.container) throw usage_error("doctor: --log reads a log, CONTAINER a container: give one of them");
    if (o.engine) throw usage_error("doctor: --engine goes with CONTAINER, not --log");
    CrashFacts crash;
    crash.source = "log " + (*o.log == "-" ? std::string("on standard input") : *o.log);
    if (o.for_door == "k8s") crash.door = CrashDoor::kKubernetes;
    read_crash_log(read_log(*o.log), crash);
    if (o.for_door && *o.for_door != "k8s") crash.door = CrashDoor::kEngine;
    return report_crash(crash, o);
  }
  if (o.for_door)
    throw usage_error("doctor: --for " + *o.for_door +
                      " says where the job of a --log ran; a CONTAINER is docker's or podman's (--engine)");
  DoctorFacts f;
  f.memory_fraction_max = config.memory_fraction_max;
  if (o.container) {
    if (o.container->empty()) throw usage_error("doctor: the CONTAINER argument is empty: give a container name or id");
    const InspectedContainer c = inspect_for_doctor(o.engine.value_or(config.engine), *o.container);
    if (has_exited(c)) return report_crash(gather_crash(c), o);
    gather_from_host(c, f);
  } else {
    if (o.engine)
      throw usage_error(
          "doctor: --engine " + *o.engine +
          " names the engine of a CONTAINER argument: give the container, or run doctor inside it without "
          "--engine");
    gather_inside(f);
    if (f.on_host) gather_runtime_entries(f, o.daemon_json, o.containerd_config, config.runtimes);
  }
  const std::vector<Finding> findings = diagnose(f);
  return report(f.target, findings, doctor_json(f, findings), o);
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
         << "/dev/shm).\n"
         << "On the host itself (no CONTAINER, run outside any container), it checks what gpu-run's runtime\n"
         << "entries in daemon.json and containerd's config.toml exec: a gpu-run entry that bypasses a GPU\n"
         << "runtime of the same file (NVIDIA's) is a WARN, one whose chained runtime is missing a FAIL.\n"
         << "A container that has exited, or a log given with --log (a training log, `docker logs` output), is\n"
         << "read for the failures /dev/shm causes: DataLoader workers killed by a bus error, PyTorch's, NCCL's,\n"
         << "vLLM's, Ray's and Triton's shared-memory errors, exit status 135 and exit code -7 (SIGBUS); and for\n"
         << "those that only look like it (file descriptors, OOM kills, segfaults, CUDA, NCCL timeouts and\n"
         << "network errors, a full disk); each with why and the fix in the engine's terms. The fix of a log\n"
         << "is gpu-run's flags, or with --for k8s (or lines prefixed by `kubectl logs --prefix`'s [pod/NAME/C])\n"
         << "the pod's gpu-run.* annotations, the webhook and `gpu-run-ctl k8s`.\n"
         << "Exit status: the worst finding, 0 OK, 3 WARN, 4 FAIL; 1 when doctor could not check,\n"
         << "2 a wrong request (bad option, unknown container, one created but never started).";
  cmd->footer(footer.str());
  cmd->add_option("CONTAINER", o->container,
                  "Name or id of a container: a running one is checked, an exited one has its exit status and logs "
                  "read (default: the one doctor runs in)");
  cmd->add_option("--log", o->log,
                  "Read a crashed job's log (a file, or - for standard input) for the /dev/shm failures of "
                  "PyTorch, NCCL, vLLM, Ray, Triton and DeepSpeed, and their look-alikes")
      ->type_name("FILE|-");
  cmd->add_option("--for", o->for_door,
                  "Where the job of --log ran, for the fix's terms: docker, podman or k8s (default: docker, or k8s "
                  "when the log has kubectl logs --prefix's [pod/NAME/CONTAINER])")
      ->type_name("DOOR")
      ->check(CLI::IsMember({"docker", "podman", "k8s"}));
  cmd->add_option("--engine", o->engine, "Engine of CONTAINER (default: the config's engine, else docker)")
      ->type_name("ENGINE")
      ->check(CLI::IsMember({"docker", "podman"}));
  cmd->add_flag("--json", o->json, "Print the facts and findings as JSON");
  cmd->add_option("--color", o->color,
                  "Colour FAIL, WARN and OK: auto (on a terminal whose TERM is not dumb, unless NO_COLOR is set), "
                  "always or never")
      ->type_name("WHEN")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->add_option("--daemon-json", o->daemon_json,
                  "On the host: dockerd's daemon.json, whose gpu-run runtime is checked against its GPU runtimes")
      ->type_name("PATH")
      ->capture_default_str();
  cmd->add_option("--containerd-config", o->containerd_config,
                  "On the host: containerd's config.toml, whose gpu-run handler is checked against its GPU runtimes")
      ->type_name("PATH")
      ->capture_default_str();
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
