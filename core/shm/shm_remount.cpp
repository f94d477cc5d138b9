#include "shm/shm_remount.hpp"

#include <nlohmann/json.hpp>
#include <system_error>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/units.hpp"
#include "oci/sandbox.hpp"
#include "shm/remount_job.hpp"

namespace gpurun {

std::vector<std::string> remount_args(const RemountRequest& r) {
  std::vector<std::string> args = {std::to_string(r.pid), std::to_string(r.size)};
  if (r.allow_shrink) args.push_back("--allow-shrink");
  if (r.host_dev) {
    args.push_back("--host-dev");
    args.push_back(std::to_string(static_cast<std::uint64_t>(*r.host_dev)));
  }
  return args;
}

RemountRequest parse_remount_args(const std::vector<std::string>& args) {
  constexpr const char* kUsage = "usage: gpu-run-hook --remount PID BYTES [--allow-shrink] [--host-dev DEV]";
  RemountRequest r;
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--allow-shrink") {
      r.allow_shrink = true;
    } else if (args[i] == "--host-dev") {
      if (i + 1 >= args.size())
        throw usage_error(std::string("--remount: --host-dev needs a device number (") + kUsage + ")");
      r.host_dev = static_cast<dev_t>(parse_count(args[++i], "--remount --host-dev", UINT64_MAX));
    } else if (!args[i].empty() && args[i][0] == '-') {
      throw usage_error("--remount: unknown option " + args[i].substr(0, 40) + " (" + kUsage + ")");
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 2) throw usage_error(std::string("--remount: expected PID and BYTES (") + kUsage + ")");
  r.pid = static_cast<int>(parse_count(positional[0], "--remount PID", 0x3fffffff));
  r.size = parse_count(positional[1], "--remount BYTES", UINT64_MAX);
  if (r.pid <= 0) throw usage_error(std::string("--remount: PID 0 is no process (") + kUsage + ")");
  return r;
}

ShmResult remount_shm_here(const RemountRequest& r) {
  UniqueFd ns(open_mount_namespace(r.pid));
  drop_capabilities();
  install_seccomp();
  join_mount_namespace(ns.get(), r.pid);
  // After setns the process's root is the namespace's: the container's root.
  return apply_shm(ShmTarget{r.pid, "/", r.size, r.allow_shrink, r.host_dev});
}

std::string remount_report(const ShmResult& result) {
  return nlohmann::json{{"outcome", outcome_name(result.outcome)}, {"before", result.before}, {"after", result.after}}
      .dump();
}

std::string remount_report(const Error& error) {
  return nlohmann::json{{"error", error.what()}, {"errno", error.errno_value()}, {"exit_code", error.exit_code()}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ShmResult RemountOutcome::get() const {
  if (result) return *result;
  throw Error(error, err, exit_code);
}

RemountOutcome parse_remount_report(const std::string& out, const std::string& err, int exit_code,
                                    const std::string& helper) {
  RemountOutcome o;
  try {
    const nlohmann::json doc = nlohmann::json::parse(out.substr(0, out.find('\n')));
    if (doc.contains("error")) {
      o.error = doc.at("error").get<std::string>();
      o.err = doc.value("errno", 0);
      o.exit_code = doc.value("exit_code", static_cast<int>(kExitFailure));
      return o;
    }
    const std::string outcome = doc.at("outcome").get<std::string>();
    for (ShmOutcome candidate :
         {ShmOutcome::kResized, ShmOutcome::kMounted, ShmOutcome::kUnchanged, ShmOutcome::kHostShm})
      if (outcome == outcome_name(candidate)) o.result = ShmResult{candidate, 0, 0};
    if (!o.result) throw Error("unknown outcome");
    o.result->before = doc.at("before").get<std::uint64_t>();
    o.result->after = doc.at("after").get<std::uint64_t>();
    if (exit_code == kExitOk) return o;
    o.result.reset();
  } catch (const std::exception&) {
    o.result.reset();
  }
  const std::string first = err.substr(0, std::min<std::size_t>(err.find('\n'), 300));
  o.error = "remount /dev/shm: " + helper + " ended without a report (exit " + std::to_string(exit_code) + ")" +
            (first.empty() ? std::string() : ": " + first);
  o.exit_code = kExitFailure;
  return o;
}

ShmResult remount_shm(const RemountRequest& request, const std::filesystem::path& helper,
                      std::chrono::milliseconds deadline) {
  return RemountJob(helper, request, deadline).wait().get();
}

}  // namespace gpurun
