#include "hook.hpp"

#include <cstring>

#include "config.hpp"
#include "error.hpp"
#include "fd.hpp"
#include "gpus.hpp"
#include "host.hpp"
#include "log.hpp"
#include "oci.hpp"
#include "profile_store.hpp"
#include "sandbox.hpp"
#include "shm_decision.hpp"
#include "shm_mount.hpp"
#include "units.hpp"

namespace gpurun {

HookOptions parse_hook_args(int argc, char** argv) {
  HookOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config") {
      if (i + 1 >= argc) throw Error("--config: missing path");
      o.config = argv[++i];
    } else if (a.compare(0, 9, "--config=") == 0) {
      o.config = a.substr(9);
    } else if (a == "--debug") {
      o.debug = true;
    } else if (a == "--help") {
      throw Error("usage: gpu-run-hook [--config PATH] [--debug] [STAGE] (the OCI state comes on stdin)", 0, kExitOk);
    } else if (!a.empty() && a[0] == '-') {
      throw Error("unknown option " + a.substr(0, 40) + " (usage: gpu-run-hook [--config PATH] [--debug] [STAGE])");
    } else {
      o.stage = a;
    }
  }
  return o;
}

int run_hook(const HookOptions& o, std::string& error_line) {
  // Host-controlled input first: config, host facts, the host's /dev/shm.
  const Config config = load_config(config_path(o.config));
  Logger log(config.log_file.string(), parse_log_level(config.log_level), "gpu-run-hook");
  log.set_echo(o.debug);
  const HostInfo host_info = probe_host();
  HostFacts host{host_info.cpus, count_host_gpus(), host_info.mem_total};
  const auto host_shm = host_shm_device();
  ProfileStore store(profile_search_path({}, config, /*include_user=*/false));

  // Read, but do not parse, what the runtime and the container control.
  std::string state_text;
  OciState state;
  try {
    state_text = read_bounded(o.state_fd, kMaxStateBytes, "OCI state on stdin");
    if (o.sandbox) {
      drop_capabilities();
      install_seccomp();
    }
    state = parse_state(state_text);
  } catch (const Error& e) {
    log.error(std::string("stage=") + log_quote(o.stage) + " action=fail error=" + log_quote(e.what()));
    error_line = e.what();
    return kExitFailure;
  }
  const std::string who = "container=" + log_quote(state.id.substr(0, 64)) + " stage=" + log_quote(o.stage);
  auto fail = [&](const std::string& message, bool explicit_request) {
    const bool must_fail = explicit_request || config.on_error == "fail";
    log.log(must_fail ? LogLevel::kError : LogLevel::kWarn,
            who + " action=" + (must_fail ? "fail" : "skip") + " error=" + log_quote(message));
    if (!must_fail) return kExitOk;
    error_line = "container " + state.id.substr(0, 12) + ": " + message;
    return kExitFailure;
  };

  SpecFacts spec;
  ContainerRequest request;
  try {
    spec = spec_facts(load_spec(state.bundle, SpecParts::kFacts), state.bundle);
    request = container_request(state.annotations, spec);
  } catch (const Error& e) {
    // Without a spec we cannot tell what the container asked for: fail only if the
    // state's own annotations asked.
    bool asked = false;
    for (const auto& [k, v] : state.annotations) asked = asked || k.compare(0, 8, "gpu-run.") == 0;
    return fail(e.what(), asked);
  }
  if (!spec.has_ipc_namespace) {
    log.info(who + " action=leave reason=" + log_quote("no ipc namespace: the container uses the host's /dev/shm"));
    return kExitOk;
  }
  ShmDecision d = decide_shm(request, spec, config, store, host);
  if (!d.error.empty()) return fail(d.error, d.explicit_request);
  if (!d.act) {
    log.debug(who + " action=leave " + describe(d));
    return kExitOk;
  }
  if (state.pid <= 0)
    return fail("OCI state has no pid: cannot reach the container's mount namespace", d.explicit_request);
  try {
    UniqueFd ns(open_mount_namespace(state.pid));
    join_mount_namespace(ns.get(), state.pid);
    ShmTarget target{state.pid, spec.rootfs, d.size, d.size_explicit, host_shm};
    ShmResult r = apply_shm(target);
    log.info(who + " action=" + outcome_name(r.outcome) + " " + describe(d) + " before=" + engine_size(r.before) +
             " after=" + engine_size(r.after) +
             (r.outcome == ShmOutcome::kHostShm ? " reason=" + log_quote("the host's /dev/shm is never resized") : ""));
    if (r.outcome != ShmOutcome::kHostShm && r.outcome != ShmOutcome::kUnchanged && r.after < d.size)
      return fail("/dev/shm is " + format_size(r.after) + " after resizing, asked for " + format_size(d.size),
                  d.explicit_request);
  } catch (const Error& e) {
    return fail(e.what(), d.explicit_request);
  }
  return kExitOk;
}

}  // namespace gpurun
