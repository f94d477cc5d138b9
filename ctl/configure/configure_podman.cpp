#include "ctl/configure/configure_podman.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/json_error.hpp"
#include "ctl/ctl_common.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"

namespace gpurun {

using nlohmann::ordered_json;

namespace {

// A hooks.d document whose hook is gpu-run-hook.
bool is_gpu_run_hook(const ordered_json& doc) {
  if (!doc.is_object() || !doc.contains("hook") || !doc["hook"].is_object()) return false;
  const ordered_json& hook = doc["hook"];
  const bool path = hook.contains("path") && hook["path"].is_string() &&
                    fs::path(hook["path"].get<std::string>()).filename() == "gpu-run-hook";
  const bool args =
      hook.contains("args") && hook["args"].is_array() && !hook["args"].empty() && hook["args"][0] == "gpu-run-hook";
  return path || args;
}

std::optional<ordered_json> parse_hook_file(const std::string& text) {
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

ordered_json hooks_d_document(const std::string& hook_path, const std::string& config_path, bool always) {
  ordered_json doc;
  doc["version"] = "1.0.0";
  doc["hook"] = {{"path", hook_path}, {"args", {"gpu-run-hook", "--config", config_path, "createRuntime"}}};
  // Every condition in "when" must match, so "always" stands alone.
  if (always)
    doc["when"] = {{"always", true}};
  else
    doc["when"] = {{"annotations", {{request_annotation_pattern(), ".*"}}}};
  doc["stages"] = {"createRuntime"};
  return doc;
}

FileEdit hook_file_edit(const std::optional<std::string>& existing, const std::string& source,
                        const ordered_json& wanted) {
  FileEdit edit;
  edit.text = wanted.dump(2) + "\n";
  edit.changed = true;
  if (!existing) return edit;
  ordered_json current;
  try {
    current = ordered_json::parse(*existing);
  } catch (const ordered_json::exception& e) {
    throw usage_error(json_parse_error(*existing, e, source) +
                      "; podman fails on a malformed hooks file: fix or remove it (gpu-run-ctl leaves it as it is)");
  }
  edit.first = !is_gpu_run_hook(current);
  if (current == wanted) {
    edit.changed = false;
  } else {
    edit.notes.push_back(source + " had other content: replaced");
  }
  return edit;
}

UndoEdit undo_hook_file(const std::optional<std::string>& current, const std::optional<std::string>& backup,
                        const std::string& source) {
  UndoEdit undo;
  if (!current) {
    undo.said = source + " does not exist: nothing to undo";
    return undo;
  }
  const std::optional<ordered_json> doc = parse_hook_file(*current);
  if (!doc || !is_gpu_run_hook(*doc))
    throw usage_error(source + " is not gpu-run's hook (" + (doc ? "its hook is not gpu-run-hook" : "malformed JSON") +
                      "): remove it by hand if it should go (gpu-run-ctl leaves it as it is)");
  const std::optional<ordered_json> before = backup ? parse_hook_file(*backup) : std::nullopt;
  if (backup && !(before && is_gpu_run_hook(*before))) {
    undo.kind = UndoEdit::kRestore;
    undo.text = *backup;
    undo.said = "restored from " + backup_path(source).string() + ", the file configure replaced, byte for byte";
    return undo;
  }
  undo.kind = UndoEdit::kRemove;
  undo.said = "removed: podman runs no gpu-run-hook from the next container on";
  return undo;
}

void run_configure_podman(const ConfigurePodmanOptions& o) {
  if (o.undo) {
    const fs::path file = fs::path(o.hooks_dir) / kHookFileName;
    const UndoEdit undo = undo_hook_file(read_existing_file(file, "hooks.d file"),
                                         read_existing_file(backup_path(file), "backup"), file.string());
    apply_undo(file, undo, o.dry_run);
    if (o.guard) apply_guard_service("podman", false, o.dry_run, o.systemctl, o.systemd_dir);
    return;
  }
  // podman stats the hook's path when it reads hooks.d and refuses to run any container otherwise.
  const fs::path hook = gpu_run_binary(o.hook_path, "gpu-run-hook", "--hook-path");
  const fs::path config_file = fs::absolute(config_path(o.config));
  const std::string missing_config = check_gpu_run_config(config_file);
  const fs::path file = fs::path(o.hooks_dir) / kHookFileName;
  const std::optional<std::string> existing = read_existing_file(file, "hooks.d file");
  const FileEdit edit =
      hook_file_edit(existing, file.string(), hooks_d_document(hook.string(), config_file.string(), o.always));

  if (o.dry_run) {
    report_dry_run(file, edit.text, edit, "JSON");
    if (o.guard) apply_guard_service("podman", true, true, o.systemctl, o.systemd_dir);
    return;
  }
  if (!edit.changed) {
    std::cout << file.string() << ": already configured (hook " << hook.string() << ", --config "
              << config_file.string() << "); nothing changed\n";
    if (o.guard) apply_guard_service("podman", true, false, o.systemctl, o.systemd_dir);
    return;
  }
  const std::optional<fs::path> backup = replace_file_with_backup(file, edit.text, existing, edit.first);
  std::cout << "wrote " << file.string() << ": gpu-run-hook at createRuntime with --config " << config_file.string()
            << "\n";
  if (backup) std::cout << "backup of the previous file: " << backup->string() << "\n";
  for (const auto& n : edit.notes) std::cout << "note: " << n << "\n";
  if (o.always) {
    std::cout << "the hook runs for every container; it sizes those that name a profile (annotation or env) and, "
                 "when the config sets default_profile, all others\n";
  } else {
    std::cout << "podman injects the hook only into containers with a gpu-run annotation, e.g. "
                 "`podman run --annotation gpu-run.profile=imagenet ...` (hooks.d cannot match environment "
                 "variables; --always runs it for every container)\n";
  }
  std::cout << "each podman command reads hooks.d anew: nothing to restart (unless containers.conf sets "
               "hooks_dir to other directories)\n";
  std::cout << missing_config;
  if (o.guard) apply_guard_service("podman", true, false, o.systemctl, o.systemd_dir);
}

void add_configure_podman_command(CLI::App& configure) {
  auto o = std::make_shared<ConfigurePodmanOptions>();
  CLI::App* cmd = configure.add_subcommand("podman", "Install a hooks.d file that makes podman run gpu-run-hook");
  cmd->add_option("--hooks-dir", o->hooks_dir, "The hooks.d directory to write gpu-run.json into")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->add_flag("--dry-run,--print", o->dry_run, "Print the hooks.d file and write nothing");
  CLI::Option* config = cmd->add_option("--config", o->config,
                                        "The gpu-run config the hook reads, passed as --config (default: "
                                        "$GPU_RUN_CONFIG, else /etc/gpu-run/config.json)")
                            ->type_name("PATH");
  CLI::Option* hook_path =
      cmd->add_option("--hook-path", o->hook_path, "gpu-run-hook to run (default: next to gpu-run-ctl)")
          ->type_name("PATH");
  CLI::Option* always = cmd->add_flag("--always", o->always,
                                      "Inject the hook into every container, not only those with a gpu-run annotation");
  cmd->add_flag_callback(
      "--no-guard", [o] { o->guard = false; },
      "Leave the node guard off (default: enable and start "
      "gpu-run-guard-podman.service, which grows /dev/shm before it fills)");
  cmd->add_flag("--undo", o->undo, "Remove the hooks.d file again (or put back the file it replaced)")
      ->excludes(config)
      ->excludes(hook_path)
      ->excludes(always);
  cmd->footer(
      "Writes <hooks-dir>/gpu-run.json (hooks.d schema 1.0.0, stage createRuntime, supported by\n"
      "podman since 2.2). hooks.d can match annotations, commands, bind mounts or always, never\n"
      "environment variables: by default the hook is injected when the container has one of the\n"
      "annotations gpu-run.profile, gpu-run.gpus, gpu-run.workers, gpu-run.batch-size or\n"
      "gpu-run.shm-size (`podman run --annotation gpu-run.profile=imagenet`); GPU_RUN_* env alone\n"
      "and the host's default_profile take effect only with --always. Runtimes start hooks with\n"
      "only the hook's own env, so the config path goes on its command line. Running it again\n"
      "changes nothing; a malformed existing file is reported and never overwritten. --undo removes\n"
      "the file (a file of that name it replaced is saved as gpu-run.json.gpu-run.bak and put back).\n"
      "It then enables and starts the node guard for podman (systemctl enable --now\n"
      "gpu-run-guard-podman.service), unless --no-guard; without systemd it prints the command to keep\n"
      "running. --undo stops and disables it (not with --no-guard).");
  cmd->callback([o] { run_configure_podman(*o); });
}

}  // namespace gpurun
