#include "ctl/configure/configure_docker.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/json_error.hpp"
#include "ctl/configure/chain.hpp"
#include "ctl/ctl_common.hpp"
#include "decision/config.hpp"
#include "engine/run_args.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kRuntimeName = "gpu-run";
constexpr const char* kDaemonJsonKeep =
    "; fix it by hand (dockerd cannot start with it either): gpu-run-ctl leaves it as it is";

bool is_blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

// daemon.json's object; an empty one for no file or a blank one.
ordered_json parse_daemon_json(const std::optional<std::string>& text, const std::string& source) {
  ordered_json doc = ordered_json::object();
  if (!text || is_blank(*text)) return doc;
  try {
    doc = ordered_json::parse(*text);
  } catch (const ordered_json::exception& e) {
    throw usage_error(json_parse_error(*text, e, source) + kDaemonJsonKeep);
  }
  if (!doc.is_object()) throw usage_error(source + ": expected a JSON object at the top level" + kDaemonJsonKeep);
  if (doc.contains("runtimes") && !doc["runtimes"].is_object())
    throw usage_error(source + ": key 'runtimes': expected an object of runtime names, got " +
                      std::string(doc["runtimes"].type_name()) + kDaemonJsonKeep);
  return doc;
}

bool has_gpu_run_entry(const ordered_json& doc) {
  return doc.contains("runtimes") && doc["runtimes"].contains(kRuntimeName);
}

// The first place `after` differs from `before`: "key 'log-level' added", "key 'runtimes.nvidia' changed";
// "" when they are equal.
std::string daemon_json_difference(const json& before, const json& after, const std::string& prefix = "") {
  for (const auto& [key, value] : after.items()) {
    const std::string name = prefix + key;
    if (!before.contains(key)) return "key '" + name + "' added";
    if (before[key] == value) continue;
    if (value.is_object() && before[key].is_object()) return daemon_json_difference(before[key], value, name + ".");
    return "key '" + name + "' changed";
  }
  for (const auto& [key, value] : before.items())
    if (!after.contains(key)) return "key '" + prefix + key + "' removed";
  return "";
}

}  // namespace

DefaultRuntime docker_default_runtime(const std::optional<std::string>& existing, const std::string& source) {
  const ordered_json doc = parse_daemon_json(existing, source);
  if (doc.contains("default-runtime") && !doc["default-runtime"].is_string())
    throw usage_error(source + ": key 'default-runtime': expected a runtime name, got " +
                      std::string(doc["default-runtime"].type_name()) + kDaemonJsonKeep);
  DefaultRuntime d;
  d.name = doc.value("default-runtime", std::string("runc"));
  const ordered_json runtimes = doc.value("runtimes", ordered_json::object());
  // "runc" is dockerd's own and a reserved name in "runtimes".
  if (d.name == "runc") {
    d.where = "dockerd's built-in runc";
    return d;
  }
  const std::string entry = "runtimes." + d.name;
  d.where = "dockerd's default runtime \"" + d.name + "\" (" + entry + ".path)";
  if (!runtimes.contains(d.name) || !runtimes[d.name].is_object())
    throw usage_error(source + ": default-runtime is \"" + d.name + "\" but " + entry +
                      " is not an object with a \"path\"" + kDaemonJsonKeep);
  const ordered_json& rt = runtimes[d.name];
  if (d.name == kRuntimeName) {
    d.is_entry = true;
    d.binary = rt.value("path", std::string());
    return d;
  }
  const std::string chainable =
      ": gpu-run-runtime chains a runtime binary without arguments; make such a runtime the default (or run "
      "configure on a file without it) (gpu-run-ctl leaves the file as it is)";
  if (!rt.contains("path") || !rt["path"].is_string() || rt["path"].get<std::string>().empty())
    throw usage_error(source + ": the default runtime \"" + d.name + "\" has no path" +
                      (rt.contains("runtimeType") ? " (it is the shim " + rt["runtimeType"].dump() + ")" : "") +
                      chainable);
  if (rt.contains("runtimeArgs") && !(rt["runtimeArgs"].is_array() && rt["runtimeArgs"].empty()))
    throw usage_error(source + ": the default runtime \"" + d.name + "\" has runtimeArgs " + rt["runtimeArgs"].dump() +
                      chainable);
  d.binary = rt["path"].get<std::string>();
  return d;
}

std::vector<NamedRuntime> daemon_json_runtimes(const std::optional<std::string>& existing, const std::string& source) {
  std::vector<NamedRuntime> out;
  const ordered_json doc = parse_daemon_json(existing, source);
  if (!doc.contains("runtimes")) return out;
  for (const auto& [name, rt] : doc["runtimes"].items())
    out.push_back({name, rt.is_object() && rt.contains("path") && rt["path"].is_string() ? rt["path"].get<std::string>()
                                                                                         : std::string()});
  return out;
}

FileEdit merge_daemon_json(const std::optional<std::string>& existing, const std::string& source,
                           const std::string& entry_binary, bool set_default) {
  ordered_json doc = parse_daemon_json(existing, source);
  const ordered_json before = doc;
  FileEdit edit;
  edit.first = !has_gpu_run_entry(doc);

  ordered_json& runtimes = doc["runtimes"];
  if (runtimes.is_null()) runtimes = ordered_json::object();
  if (runtimes.contains(kRuntimeName) && !runtimes[kRuntimeName].is_object())
    throw usage_error(source + ": key 'runtimes.gpu-run': expected an object with \"path\", got " +
                      std::string(runtimes[kRuntimeName].type_name()) + kDaemonJsonKeep);
  ordered_json& entry = runtimes[kRuntimeName];
  if (entry.is_null()) entry = ordered_json::object();
  if (entry.contains("path") && entry["path"] != entry_binary) {
    edit.notes.push_back("runtimes.gpu-run.path was " + entry["path"].dump() + ", now \"" + entry_binary + "\"");
  }
  entry["path"] = entry_binary;

  if (set_default) {
    if (doc.contains("default-runtime") && !doc["default-runtime"].is_string())
      throw usage_error(source + ": key 'default-runtime': expected a runtime name, got " +
                        std::string(doc["default-runtime"].type_name()) + kDaemonJsonKeep);
    const std::string previous = doc.value("default-runtime", std::string("runc"));
    if (previous != kRuntimeName) {
      doc["default-runtime"] = kRuntimeName;
      edit.notes.push_back("default-runtime was \"" + previous + "\", now \"gpu-run\", which execs \"" + previous +
                           "\" after sizing /dev/shm");
    }
  } else if (doc.value("default-runtime", std::string()) != kRuntimeName) {
    edit.notes.push_back(
        "containers use gpu-run only with `docker run --runtime gpu-run` (or configure with "
        "--set-default)");
  }

  edit.changed = doc != before;
  edit.text = doc.dump(2) + "\n";
  return edit;
}

UndoEdit undo_daemon_json(const std::optional<std::string>& current, const std::optional<std::string>& backup,
                          const std::string& source) {
  UndoEdit undo;
  if (!current) {
    undo.said = source + " does not exist: nothing to undo";
    return undo;
  }
  ordered_json after = parse_daemon_json(current, source);
  if (!has_gpu_run_entry(after)) {
    undo.said = source + " has no runtimes.gpu-run: nothing to undo";
    return undo;
  }
  const std::string bak = backup_path(source).string();
  const std::optional<ordered_json> before =
      backup ? std::optional<ordered_json>(parse_daemon_json(backup, bak)) : std::nullopt;
  const bool was_default = after.value("default-runtime", std::string()) == kRuntimeName;
  const std::string by_hand = "remove runtimes.gpu-run" +
                              std::string(was_default ? " and set default-runtime back to the runtime it chains" : "") +
                              " by hand";
  if (before && has_gpu_run_entry(*before))
    throw usage_error(bak + " has runtimes.gpu-run too (an older gpu-run-ctl kept it): " + by_hand +
                      " (gpu-run-ctl leaves both files as they are)");
  if (after["runtimes"].is_object() && after["runtimes"][kRuntimeName].is_object())
    undo.entry_binary = after["runtimes"][kRuntimeName].value("path", std::string());

  after["runtimes"].erase(kRuntimeName);
  if (after["runtimes"].empty() && !(before && before->contains("runtimes"))) after.erase("runtimes");
  if (was_default) {
    if (before && before->contains("default-runtime"))
      after["default-runtime"] = (*before)["default-runtime"];
    else
      after.erase("default-runtime");
  }
  if (!before) {
    if (after.empty()) {
      undo.kind = UndoEdit::kRemove;
      undo.said = "removed (gpu-run-ctl configure created it)";
      return undo;
    }
    throw usage_error(source + ": no backup " + bak +
                      " to restore (it was removed, or the entry was not added by gpu-run-ctl configure): " + by_hand +
                      " (gpu-run-ctl leaves the file as it is)");
  }
  // Compared as JSON (key order and layout aside), restored as the backup's bytes.
  const std::string change = json(after) == json(*before) ? "" : daemon_json_difference(json(*before), json(after));
  UndoEdit restore = restore_unless_changed(source, change, by_hand, bak, *backup);
  restore.entry_binary = undo.entry_binary;
  return restore;
}

std::string dockerd_reload_hint(const std::string& daemon_json, const std::optional<std::string>& text) {
  std::string pidfile;
  if (text) {
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("pidfile") && j["pidfile"].is_string()) pidfile = j["pidfile"];
  }
  const bool system_daemon = daemon_json == kDefaultDaemonJson;
  if (pidfile.empty() && system_daemon) pidfile = "/var/run/docker.pid";
  const std::string signal = pidfile.empty()
                                 ? "`kill -HUP PID` with the pid of the dockerd started with --config-file " +
                                       daemon_json + " (its --pidfile names it)"
                                 : "`kill -HUP \"$(cat " + shell_quote(pidfile) + ")\"`";
  return system_daemon ? "run `systemctl reload docker` (or " + signal + ")" : "send it SIGHUP: " + signal;
}

namespace {

void run_undo_docker(const ConfigureDockerOptions& o) {
  const fs::path daemon_json = o.daemon_json;
  const std::optional<std::string> current = read_existing_file(daemon_json, "daemon.json");
  const std::optional<std::string> backup = read_existing_file(backup_path(daemon_json), "backup");
  const UndoEdit undo = undo_daemon_json(current, backup, daemon_json.string());
  apply_undo(daemon_json, undo, o.dry_run);
  if (o.guard) apply_guard_service("docker", false, o.dry_run, o.systemctl, o.systemd_dir);
  if (o.dry_run || undo.kind == UndoEdit::kNothing) return;
  std::cout << "dockerd reads runtimes at start and on SIGHUP: "
            << dockerd_reload_hint(daemon_json.string(), read_existing_file(daemon_json, "daemon.json"))
            << "; running containers keep their /dev/shm, and a container created with the runtime gpu-run no longer "
               "starts once dockerd forgot it: recreate it\n";
}

}  // namespace

void run_configure_docker(const ConfigureDockerOptions& o) {
  if (o.undo) {
    run_undo_docker(o);
    return;
  }
  const fs::path runtime = gpu_run_binary(o.runtime_path, "gpu-run-runtime", "--runtime-path");
  const fs::path config_file = config_path(o.config);
  const std::string missing_config = check_gpu_run_config(config_file);

  const fs::path daemon_json = o.daemon_json;
  const std::optional<std::string> existing = read_existing_file(daemon_json, "daemon.json");
  const Chain chain =
      resolve_chain(docker_default_runtime(existing, daemon_json.string()), daemon_json.string(), runtime);
  const fs::path chain_path = chain_file_path(daemon_json, kRuntimeName);
  const fs::path entry_binary = chain.next ? chain_path : runtime;
  const FileEdit edit = merge_daemon_json(existing, daemon_json.string(), entry_binary.string(), o.set_default);
  const ChainFile chain_file =
      plan_chain_file(chain, chain_path, runtime, "configure docker",
                      "the runtime \"gpu-run\" of " + fs::absolute(daemon_json).string(), edit.changed);

  if (o.dry_run) {
    report_dry_run(daemon_json, edit.text, edit, "JSON");
    report_chain_dry_run(chain, chain_file);
    std::cerr << runtime_config_note(config_file, "dockerd", "docker") << missing_config;
    if (o.guard) apply_guard_service("docker", true, true, o.systemctl, o.systemd_dir);
    return;
  }
  if (!edit.changed && !chain_file.write) {
    std::cout << daemon_json.string() << ": already configured (runtimes.gpu-run: " << chain_words(chain)
              << (o.set_default ? "; default-runtime = gpu-run" : "") << "); nothing changed\n";
    for (const auto& n : edit.notes) std::cout << "note: " << n << "\n";
    if (o.guard) apply_guard_service("docker", true, false, o.systemctl, o.systemd_dir);
    return;
  }
  // The chain file first: the entry never names a file that is not there yet.
  write_chain_file(chain_file);
  if (edit.changed) {
    const std::optional<fs::path> backup = replace_file_with_backup(daemon_json, edit.text, existing, edit.first);
    std::cout << "wrote " << daemon_json.string() << ": runtimes.gpu-run.path = " << entry_binary.string()
              << (o.set_default ? ", default-runtime = gpu-run" : "") << "\n";
    if (backup) std::cout << "backup of the previous file (what --undo restores): " << backup->string() << "\n";
  }
  report_chain(chain, chain_file);
  for (const auto& n : edit.notes) std::cout << "note: " << n << "\n";
  std::cout << "dockerd reads runtimes and default-runtime at start and on SIGHUP: "
            << dockerd_reload_hint(daemon_json.string(),
                                   edit.changed ? std::optional<std::string>(edit.text) : existing)
            << ", or restart it\n";
  std::cout << runtime_config_note(config_file, "dockerd", "docker") << missing_config;
  if (o.guard) apply_guard_service("docker", true, false, o.systemctl, o.systemd_dir);
}

void add_configure_docker_command(CLI::App& configure) {
  auto o = std::make_shared<ConfigureDockerOptions>();
  CLI::App* cmd = configure.add_subcommand("docker", "Register gpu-run-runtime in dockerd's daemon.json");
  CLI::Option* set_default =
      cmd->add_flag("--set-default", o->set_default, "Also make gpu-run the default runtime (\"default-runtime\")");
  cmd->add_flag("--dry-run,--print", o->dry_run, "Print the resulting daemon.json and write nothing");
  cmd->add_option("--daemon-json", o->daemon_json, "The daemon.json to edit")->type_name("PATH")->capture_default_str();
  add_entry_options(*cmd, o->config, o->runtime_path, "gpu-run-runtime to register (default: next to gpu-run-ctl)",
                    o->undo, "Take gpu-run's entry out again: restore daemon.json from its backup, as it was before")
      ->excludes(set_default);
  cmd->add_flag_callback(
      "--no-guard", [o] { o->guard = false; },
      "Leave the node guard off (default: enable and start gpu-run-guard.service, which grows /dev/shm "
      "before it fills)");
  cmd->footer(
      "Adds runtimes.\"gpu-run\".path and keeps every other key. gpu-run-runtime then execs the runtime\n"
      "containers run under now: dockerd's default-runtime (NVIDIA's, when nvidia-ctk made it the default),\n"
      "written with its path to <dir of daemon.json>/gpu-run-runtime.gpu-run, the file the entry runs; runc\n"
      "when the default is dockerd's built-in. A default that cannot be chained (no path, a path that does\n"
      "not exist, gpu-run-runtime itself) is refused and nothing is written. The file as it was before\n"
      "gpu-run's entry is saved as <daemon.json>.gpu-run.bak and the new one replaces it atomically;\n"
      "--undo restores it byte for byte, and refuses when the file changed otherwise since. Running it\n"
      "again changes nothing. A malformed daemon.json is reported (file:line:column) and never\n"
      "overwritten. dockerd reloads runtimes on SIGHUP (`systemctl reload docker`).\n"
      "It then enables and starts the node guard (systemctl enable --now gpu-run-guard.service), unless\n"
      "--no-guard; without systemd it prints the command to keep running. --undo stops and disables it (not with "
      "--no-guard).\n"
      "daemon.json has no place for gpu-run's config path: gpu-run-runtime reads $GPU_RUN_CONFIG from\n"
      "dockerd's environment, else /etc/gpu-run/config.json. For another path, give dockerd the variable\n"
      "(a systemd drop-in; printed when --config names another file).");
  cmd->callback([o] { run_configure_docker(*o); });
}

}  // namespace gpurun
