#include "runtime/runtime.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "base/clock.hpp"
#include "base/enum_name.hpp"
#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/log.hpp"
#include "base/process.hpp"
#include "base/program_path.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "door/door.hpp"
#include "oci/oci.hpp"
#include "oci/runtime_chain.hpp"
#include "shm/shm_mount.hpp"

namespace gpurun {
namespace {

// runc's global options that take a value.
const std::set<std::string>& global_value_options() {
  static const std::set<std::string> opts = {"--root", "--log", "--log-format", "--criu", "--rootless"};
  return opts;
}

}  // namespace

RuntimeArgs parse_runtime_args(const std::vector<std::string>& args) {
  RuntimeArgs r;
  std::size_t i = 0;
  if (args.size() >= 2 && args[0] == kChainOption) {
    r.chain = args[1];
    r.own = i = 2;
  }
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') break;
    std::string name = a, value;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (global_value_options().count(a) && i + 1 < args.size()) {
      value = args[++i];
    }
    if (name == "--log") r.log = value;
    if (name == "--log-format") r.log_format = value;
  }
  if (i >= args.size()) return r;
  r.subcommand = args[i++];
  if (r.subcommand != "create" && r.subcommand != "run") return r;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--bundle" || a == "-b") {
      if (i + 1 < args.size()) r.bundle = args[++i];
    } else if (a.compare(0, 9, "--bundle=") == 0) {
      r.bundle = a.substr(9);
    } else if (a.compare(0, 3, "-b=") == 0) {
      r.bundle = a.substr(3);
    }
  }
  return r;
}

std::string find_real_runtime(const std::vector<std::string>& candidates) {
  const fs::path self = program_path();
  const auto is_self = [&](const fs::path& p) {
    std::error_code ec;
    return fs::equivalent(p, self, ec);
  };
  for (const std::string& c : candidates)
    if (const std::optional<fs::path> found = find_executable(c, is_self)) return found->string();
  std::string list;
  for (const auto& c : candidates) list += (list.empty() ? "" : ", ") + c;
  throw Error("no real OCI runtime found (tried " + list + "): install runc or set \"runtimes\" in the gpu-run config",
              ENOENT, kExitFailure);
}

std::string chained_runtime(const std::string& chain_file) {
  const std::string again =
      "; run `gpu-run-ctl configure docker` (or `configure containerd`) again to chain the engine's default runtime";
  RuntimeChain chain;
  try {
    chain = read_runtime_chain(chain_file);
  } catch (const Error& e) {
    throw Error(std::string("gpu-run-runtime --chain ") + e.what() + again, e.errno_value(), kExitFailure);
  }
  const std::string next = chain.next.string();
  if (!find_executable(next))
    throw Error(chain_file + ": runtime=" + next +
                    " is not an executable file (the chained runtime moved or was removed)" + again,
                ENOENT, kExitFailure);
  std::error_code ec;
  if (fs::equivalent(chain.next, program_path(), ec))
    throw Error(chain_file + ": runtime=" + next + " is gpu-run-runtime itself, a loop" + again, ELOOP, kExitFailure);
  return next;
}

SpecEdit edit_spec(nlohmann::json& spec, const SpecFacts& facts, const ShmDecision& d, const std::string& hook_path,
                   const std::string& config_file) {
  const int idx = find_shm_mount(spec);
  if (idx >= 0 && facts.shm_type == SpecShmType::kTmpfs) {
    if (facts.shm_size && *facts.shm_size >= d.size && !d.size_explicit)
      return {SpecEdit::kUnchanged, " before=" + engine_size(*facts.shm_size)};
    set_tmpfs_size(spec["mounts"][static_cast<std::size_t>(idx)], d.size);
    return {SpecEdit::kSpecSize, ""};
  }
  // No tmpfs at /dev/shm in the spec (--ipc=shareable, none, a bind): the hook sizes it
  // once the container's mount namespace exists.
  if (!add_hook(spec, "createRuntime", hook_path, {"gpu-run-hook", "--config", config_file, "createRuntime"}))
    return {SpecEdit::kUnchanged, " note=" + log_quote("hook already present")};
  return {SpecEdit::kInjectHook, ""};
}

void record_decision(nlohmann::json& spec, const DecisionRecord& record) {
  if (!spec.contains("annotations") || !spec["annotations"].is_object()) spec["annotations"] = nlohmann::json::object();
  spec["annotations"][kDecisionKey] = decision_text(record);
}

const char* edit_name(SpecEdit::Kind kind) {
  static const char* const kNames[] = {"unchanged", "spec-size", "inject-hook"};
  return enum_name(kind, kNames);
}

Bundle load_bundle(const std::string& bundle_arg) {
  Bundle b;
  std::error_code ec;
  b.dir = fs::absolute(bundle_arg, ec);
  if (ec) b.dir = bundle_arg;
  b.spec = load_spec(b.dir);
  b.facts = spec_facts(b.spec, b.dir);
  return b;
}

void write_bundle(const Bundle& b) {
  // Atomic for runc, which reads it next; not fsync'ed: a bundle does not outlive a crash
  // (the engine recreates it), and two fsyncs cost a disk-backed /run milliseconds per start.
  write_file_atomic((b.dir / "config.json").string(), b.spec.dump(), 0644, Durability::kVolatile);
}

namespace {

// The engine's own tmpfs bound at /dev/shm (a pod's, Docker's shareable one, podman's) is
// mounted on the host already: resized there, no hook. A pod's app container most often finds
// it sized by its sandbox (unchanged). nullopt: not such a bind, or not reachable from here
// (the hook remains for it).
std::optional<bool> resize_on_host(const Bundle& b, const ShmDecision& d, const DecisionContext& ctx,
                                   const std::string& who) {
  const SpecFacts& facts = b.facts;
  if (facts.shm_type != SpecShmType::kBind || !facts.shm_source || !is_engine_shm_source(*facts.shm_source))
    return std::nullopt;
  // As the hook does: a failure fails the start only when asked for (dispose_failure).
  auto failure = [&](const std::string& message) {
    const Disposition failed = dispose_failure(message, d.explicit_request, ctx.config);
    log_disposition(ctx.log, who, failed);
    if (failed.action == Action::kFail) throw Error(failed.error, 0, kExitFailure);
    return false;
  };
  std::optional<ShmResult> r;
  try {
    r = resize_engine_shm(*facts.shm_source, d.size, d.size_explicit, host_shm_device());
  } catch (const Error& e) {
    return failure(e.what());
  }
  if (!r) return std::nullopt;
  ctx.log.info(who + " " + result_fields(d, *r) + " where=host");
  if (const std::optional<Error> short_by = short_of_size(*r, d.size)) return failure(short_by->what());
  return false;
}

}  // namespace

bool prepare_bundle(const std::string& bundle_arg, const DecisionContext& ctx, const std::string& runtime) {
  // Load, decide, modify, write (nvidia-container-toolkit's spec Load/Modify/Flush).
  Bundle bundle = load_bundle(bundle_arg);
  const ContainerPlan plan =
      plan_container({}, bundle.facts, ctx.config, ctx.store, [&ctx] { return probe_host_facts(ctx.log); });
  const std::string who = "bundle=" + log_quote(bundle.dir.string()) + " runtime=" + log_quote(runtime);
  if (plan.disposition.action != Action::kAct) {
    log_disposition(ctx.log, who, plan.disposition);
    if (plan.disposition.action == Action::kFail)
      throw Error(plan.disposition.error, plan.disposition.errno_value, kExitFailure);
    return false;
  }
  // What it decided, once, in the spec (decision_record.hpp): written with the spec's edit, or alone when
  // the size is applied on the host or was there already.
  record_decision(bundle.spec, decision_record(plan.decision, "gpu-run-runtime"));
  if (!plan.decision.command_warning.empty())
    ctx.log.warn(who + " action=warn warning=" + log_quote(plan.decision.command_warning));
  if (const std::optional<bool> done = resize_on_host(bundle, plan.decision, ctx, who)) {
    write_bundle(bundle);
    return *done;
  }
  const fs::path hook = hook_program_path(ctx.config.hook_path);
  const SpecEdit edit = edit_spec(bundle.spec, bundle.facts, plan.decision, hook.string(), ctx.config_file.string());
  write_bundle(bundle);
  ctx.log.info(who + " action=" + edit_name(edit.kind) + " " + describe(plan.decision) + edit.detail);
  return true;
}

void report_runtime_error(const RuntimeArgs& args, const std::string& message) {
  if (!args.log || args.log->empty()) return;
  const std::string stamp = utc_timestamp(std::time(nullptr));
  std::string line;
  if (args.log_format == "json") {
    line = nlohmann::json{{"level", "error"}, {"msg", "gpu-run: " + message}, {"time", stamp}}.dump() + "\n";
  } else {
    line = std::string("time=\"") + stamp + "\" level=error msg=" + log_quote("gpu-run: " + message) + "\n";
  }
  UniqueFd fd(::open(args.log->c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (fd) (void)!::write(fd.get(), line.data(), line.size());
}

void run_runtime(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  RuntimeArgs ra = parse_runtime_args(args);
  std::string real;
  try {
    // The runtime is found first: a create that cannot go on changes no bundle.
    if (ra.chain) {
      real = chained_runtime(*ra.chain);
      if (ra.subcommand == "create" || ra.subcommand == "run") {
        const DecisionContext ctx(config_path(std::nullopt), "gpu-run-runtime");
        prepare_bundle(ra.bundle.value_or("."), ctx, real);
      }
    } else if (ra.subcommand == "create" || ra.subcommand == "run") {
      const DecisionContext ctx(config_path(std::nullopt), "gpu-run-runtime");
      real = find_real_runtime(ctx.config.runtimes);
      prepare_bundle(ra.bundle.value_or("."), ctx, real);
    } else {
      // state, start, kill, delete, ...: containerd's shim runs several per container; they
      // need the real runtime's name only, not the log or the profile store, and a malformed
      // config never stops them: the real runtime answers with its own exit code and words.
      real = find_real_runtime(passthrough_runtimes(config_path(std::nullopt)));
    }
  } catch (const Error& e) {
    report_runtime_error(ra, e.what());
    throw;
  }
  // A chain file's #! line replaced the engine's argv[0] with the file: the chained runtime
  // gets its own name. Without one, argv[0] is passed on as the engine gave it.
  std::vector<char*> argv2;
  argv2.push_back(ra.chain ? real.data() : argv[0]);
  for (std::size_t i = 1 + ra.own; i < static_cast<std::size_t>(argc); ++i) argv2.push_back(argv[i]);
  argv2.push_back(nullptr);
  ::execv(real.c_str(), argv2.data());
  throw system_error("exec " + real, errno);
}

}  // namespace gpurun
