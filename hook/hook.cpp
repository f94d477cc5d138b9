#include "hook/hook.hpp"

#include <unistd.h>

#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "door/door.hpp"
#include "oci/oci.hpp"
#include "oci/sandbox.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {

HookOptions parse_hook_args(int argc, char** argv) {
  HookOptions o;
  if (argc >= 2 && std::string(argv[1]) == "--remount") {
    o.remount = parse_remount_args(std::vector<std::string>(argv + 2, argv + argc));
    return o;
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config") {
      if (i + 1 >= argc) throw usage_error("--config: missing path");
      o.config = argv[++i];
    } else if (a.compare(0, 9, "--config=") == 0) {
      o.config = a.substr(9);
    } else if (a == "--debug") {
      o.debug = true;
    } else if (a == "--help") {
      throw Error("usage: gpu-run-hook [--config PATH] [--debug] [STAGE] (the OCI state comes on stdin)", 0, kExitOk);
    } else if (!a.empty() && a[0] == '-') {
      throw usage_error("unknown option " + a.substr(0, 40) +
                        " (usage: gpu-run-hook [--config PATH] [--debug] [STAGE])");
    } else {
      o.stage = a;
    }
  }
  return o;
}

int run_remount(const RemountRequest& request, int out) {
  std::string report;
  int code = kExitOk;
  try {
    report = remount_report(remount_shm_here(request));
  } catch (const Error& e) {
    report = remount_report(e);
    code = e.exit_code();
  } catch (const std::exception& e) {
    report = remount_report(Error(e.what()));
    code = kExitFailure;
  }
  report += '\n';
  (void)!::write(out, report.data(), report.size());
  return code;
}

HookResult run_hook(const HookOptions& o) {
  // Host-controlled input first: config, host facts, the host's /dev/shm.
  DecisionContext ctx(config_path(o.config), "gpu-run-hook");
  ctx.log.set_echo(o.debug);
  const HostFacts host = probe_host_facts(ctx.log);
  const auto host_shm = host_shm_device();

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
    ctx.log.error(std::string("stage=") + log_quote(o.stage) + " action=fail error=" + log_quote(e.what()));
    return {kExitFailure, e.what()};
  }
  const std::string who = "container=" + log_quote(state.id.substr(0, 64)) + " stage=" + log_quote(o.stage);
  auto finish = [&](const Disposition& disposition) -> HookResult {
    log_disposition(ctx.log, who, disposition);
    if (disposition.action != Action::kFail) return {};
    return {kExitFailure, "container " + state.id.substr(0, 12) + ": " + disposition.error};
  };

  SpecFacts spec;
  try {
    spec = spec_facts(load_spec(state.bundle, SpecParts::kFacts), state.bundle);
  } catch (const Error& e) {
    // Without a spec we cannot tell what the container asked for: fail only if the
    // state's own annotations asked.
    return finish(dispose_failure(e.what(), has_request_annotation(state.annotations), ctx.config));
  }
  const ContainerPlan plan = plan_container(state.annotations, spec, ctx.config, ctx.store, [&] { return host; });
  const ShmDecision& d = plan.decision;
  if (plan.disposition.action != Action::kAct) return finish(plan.disposition);
  auto failure = [&](const std::string& message) {
    return finish(dispose_failure(message, d.explicit_request, ctx.config));
  };
  if (state.pid <= 0) return failure("OCI state has no pid: cannot reach the container's mount namespace");
  // What it decided, once, where the guard reads it (the hook cannot change the spec), while
  // still in the host's mount namespace. The record is the guard's; a start never fails for it.
  try {
    write_decision_state(o.decision_dir, state.id, decision_record(d, "gpu-run-hook"));
  } catch (const Error& e) {
    ctx.log.warn(who + " action=warn error=" + log_quote(std::string("cannot keep the decision record: ") + e.what()));
  }
  if (!d.command_warning.empty()) ctx.log.warn(who + " action=warn warning=" + log_quote(d.command_warning));
  try {
    UniqueFd ns(open_mount_namespace(state.pid));
    join_mount_namespace(ns.get(), state.pid);
    ShmTarget target{state.pid, spec.rootfs, d.size, d.size_explicit, host_shm};
    ShmResult r = apply_shm(target);
    ctx.log.info(who + " " + result_fields(d, r));
    if (const std::optional<Error> short_by = short_of_size(r, d.size)) return failure(short_by->what());
  } catch (const Error& e) {
    return failure(e.what());
  }
  return {};
}

}  // namespace gpurun
