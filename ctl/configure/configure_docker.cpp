#include "configure_docker.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "ctl_common.hpp"
#include "error.hpp"
#include "json_error.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr const char* kRuntimeName = "gpu-run";

bool is_blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

}  // namespace

FileEdit merge_daemon_json(const std::optional<std::string>& existing, const std::string& source,
                           const std::string& runtime_path, bool set_default) {
  const std::string keep = "; fix it by hand (dockerd cannot start with it either): gpu-run-ctl leaves it as it is";
  ordered_json doc = ordered_json::object();
  if (existing && !is_blank(*existing)) {
    try {
      doc = ordered_json::parse(*existing);
    } catch (const ordered_json::parse_error& e) {
      throw usage_error(json_syntax_error(*existing, e.byte, e.what(), source) + keep);
    } catch (const ordered_json::exception& e) {
      throw usage_error(source + ": malformed JSON: " + e.what() + keep);
    }
    if (!doc.is_object()) throw usage_error(source + ": expected a JSON object at the top level" + keep);
  }
  const ordered_json before = doc;
  FileEdit edit;

  if (doc.contains("runtimes") && !doc["runtimes"].is_object())
    throw usage_error(source + ": key 'runtimes': expected an object of runtime names, got " +
                      std::string(doc["runtimes"].type_name()) + keep);
  ordered_json& runtimes = doc["runtimes"];
  if (runtimes.is_null()) runtimes = ordered_json::object();
  if (runtimes.contains(kRuntimeName) && !runtimes[kRuntimeName].is_object())
    throw usage_error(source + ": key 'runtimes.gpu-run': expected an object with \"path\", got " +
                      std::string(runtimes[kRuntimeName].type_name()) + keep);
  ordered_json& entry = runtimes[kRuntimeName];
  if (entry.is_null()) entry = ordered_json::object();
  if (entry.contains("path") && entry["path"] != runtime_path) {
    edit.notes.push_back("runtimes.gpu-run.path was " + entry["path"].dump() + ", now \"" + runtime_path + "\"");
  }
  entry["path"] = runtime_path;

  if (set_default) {
    if (doc.contains("default-runtime") && !doc["default-runtime"].is_string())
      throw usage_error(source + ": key 'default-runtime': expected a runtime name, got " +
                        std::string(doc["default-runtime"].type_name()) + keep);
    const std::string previous = doc.value("default-runtime", std::string("runc"));
    if (previous != kRuntimeName) {
      doc["default-runtime"] = kRuntimeName;
      if (previous != "runc") {
        edit.notes.push_back("default-runtime was \"" + previous +
                             "\": gpu-run-runtime now runs first and execs the first of the gpu-run config's "
                             "\"runtimes\"; put that runtime's binary there (e.g. [\"nvidia-container-runtime\"]) "
                             "to keep it");
      }
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

void run_configure_docker(const ConfigureDockerOptions& o) {
  const fs::path runtime = gpu_run_binary(o.runtime_path, "gpu-run-runtime", "--runtime-path");
  const fs::path config_file = config_path(o.config);
  const std::string missing_config = check_gpu_run_config(config_file);

  const fs::path daemon_json = o.daemon_json;
  const std::optional<std::string> existing = read_existing_file(daemon_json, "daemon.json");
  const FileEdit edit = merge_daemon_json(existing, daemon_json.string(), runtime.string(), o.set_default);

  if (o.dry_run) {
    report_dry_run(daemon_json, edit.text, edit, "JSON");
    std::cerr << runtime_config_note(config_file, "dockerd", "docker") << missing_config;
    return;
  }
  if (!edit.changed) {
    std::cout << daemon_json.string() << ": already configured (runtimes.gpu-run.path = " << runtime.string()
              << (o.set_default ? ", default-runtime = gpu-run" : "") << "); nothing changed\n";
    for (const auto& n : edit.notes) std::cout << "note: " << n << "\n";
    return;
  }
  const std::optional<fs::path> backup = replace_file_with_backup(daemon_json, edit.text, existing);
  std::cout << "wrote " << daemon_json.string() << ": runtimes.gpu-run.path = " << runtime.string()
            << (o.set_default ? ", default-runtime = gpu-run" : "") << "\n";
  if (backup) std::cout << "backup of the previous file: " << backup->string() << "\n";
  for (const auto& n : edit.notes) std::cout << "note: " << n << "\n";
  std::cout << "dockerd reads runtimes and default-runtime at start and on SIGHUP: run `systemctl reload docker` "
               "(or `kill -HUP $(pidof dockerd)`, or restart it)\n";
  std::cout << runtime_config_note(config_file, "dockerd", "docker") << missing_config;
}

void add_configure_docker_command(CLI::App& configure) {
  auto o = std::make_shared<ConfigureDockerOptions>();
  CLI::App* cmd = configure.add_subcommand("docker", "Register gpu-run-runtime in dockerd's daemon.json");
  cmd->add_flag("--set-default", o->set_default, "Also make gpu-run the default runtime (\"default-runtime\")");
  cmd->add_flag("--dry-run,--print", o->dry_run, "Print the resulting daemon.json and write nothing");
  cmd->add_option("--daemon-json", o->daemon_json, "The daemon.json to edit")->type_name("PATH")->capture_default_str();
  cmd->add_option(
         "--config", o->config,
         "The gpu-run config the runtime should read (default: $GPU_RUN_CONFIG, else /etc/gpu-run/config.json)")
      ->type_name("PATH");
  cmd->add_option("--runtime-path", o->runtime_path, "gpu-run-runtime to register (default: next to gpu-run-ctl)")
      ->type_name("PATH");
  cmd->footer(
      "Adds runtimes.\"gpu-run\".path and keeps every other key; the previous file is saved as\n"
      "<daemon.json>.gpu-run.bak and the new one replaces it atomically. Running it again changes\n"
      "nothing. A malformed daemon.json is reported (file:line:column) and never overwritten.\n"
      "dockerd reloads runtimes on SIGHUP (`systemctl reload docker`).\n"
      "daemon.json has no place for gpu-run's config path (a runtime entry has only \"path\" and\n"
      "\"runtimeArgs\"): gpu-run-runtime reads $GPU_RUN_CONFIG from dockerd's environment, else\n"
      "/etc/gpu-run/config.json. For another path, give dockerd the variable (a systemd drop-in;\n"
      "printed when --config names another file).");
  cmd->callback([o] { run_configure_docker(*o); });
}

}  // namespace gpurun
