#include "configure_containerd.hpp"

#include <tsl/ordered_map.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <sstream>
#include <toml.hpp>
#include <vector>

#include "contract.hpp"
#include "error.hpp"
#include "k8s_quantity.hpp"

namespace gpurun {
namespace {

// Comments kept, tables in the file's order.
using Toml = toml::basic_value<toml::preserve_comments, tsl::ordered_map, std::vector>;

constexpr const char* kRuncShim = "io.containerd.runc.v2";
constexpr const char* kKeep = " (gpu-run-ctl leaves the file as it is)";

// The plugin whose `containerd.runtimes` holds the CRI runtime handlers, per config version.
const char* cri_runtime_plugin(int version) {
  return version == 3 ? "io.containerd.cri.v1.runtime" : "io.containerd.grpc.v1.cri";
}

// toml11's multi-line report as one line: "<source>:<line>: <what> (<the caret's note>)".
std::string toml_error_line(const toml::exception& e, const std::string& source) {
  const std::string report = e.what();
  std::string what = report.substr(0, report.find('\n'));
  for (const char* prefix : {"[error] ", "toml::"}) {
    if (what.rfind(prefix, 0) == 0) what.erase(0, std::string(prefix).size());
  }
  // "parse_key: an invalid key appeared." -> "an invalid key appeared."
  if (const auto colon = what.find(": "); colon != std::string::npos && what.find(' ') > colon)
    what.erase(0, colon + 2);
  if (const auto caret = report.find("^--- "); caret != std::string::npos)
    what += " (" + report.substr(caret + 5, report.find('\n', caret) - caret - 5) + ")";
  const auto line = e.location().line();
  return source + (line > 0 ? ":" + std::to_string(line) : "") + ": " + what;
}

// A key as TOML writes it in a table header.
std::string header_key(const std::string& key) { return toml::format_key(key); }

// Equal values; comments do not count.
bool same_values(const Toml& a, const Toml& b) {
  return toml::format(a, 0, 17, /*no_comment=*/true) == toml::format(b, 0, 17, /*no_comment=*/true);
}

class ConfigEditor {
 public:
  explicit ConfigEditor(std::string source) : source_(std::move(source)) {}

  // The table `key` of `parent` (whose header is `path`), created when missing.
  Toml& table(Toml& parent, const std::string& path, const std::string& key) {
    const std::string child = path.empty() ? header_key(key) : path + "." + header_key(key);
    if (!parent.contains(key)) {
      parent.as_table()[key] = Toml::table_type{};
      changed_ = true;
    }
    Toml& value = parent.as_table()[key];
    if (!value.is_table())
      throw usage_error(source_ + ": key " + child + ": expected a table, got " + toml::stringize(value.type()) +
                        "; fix it by hand, containerd cannot read it either" + kKeep);
    return value;
  }

  // Sets `key` of `table` to `wanted`, keeping the old value's comments; a note when it had
  // another value (`report`: false for a table gpu-run-ctl just created).
  void set(Toml& table, const std::string& path, const std::string& key, const Toml& wanted, bool report) {
    auto& entries = table.as_table();
    const auto it = entries.find(key);
    if (it != entries.end() && same(it->second, wanted)) return;
    std::vector<std::string> comments;
    if (it != entries.end()) {
      comments.assign(it->second.comments().begin(), it->second.comments().end());
      if (report) notes_.push_back(path + "." + key + " was " + shown(it->second) + ", now " + shown(wanted));
    } else if (report) {
      notes_.push_back(path + "." + key + " set to " + shown(wanted));
    }
    Toml value = wanted;
    value.comments().assign(comments.begin(), comments.end());
    entries[key] = value;
    changed_ = true;
  }

  // Adds the strings of `wanted` missing from the string array `key` (kept otherwise).
  void add_to_array(Toml& table, const std::string& path, const std::string& key,
                    const std::vector<std::string>& wanted, bool report) {
    if (!table.contains(key)) {
      set(table, path, key, Toml(Toml::array_type(wanted.begin(), wanted.end())), report);
      return;
    }
    Toml& array = table.as_table()[key];
    if (!array.is_array())
      throw usage_error(source_ + ": key " + path + "." + key + ": expected an array of strings, got " +
                        toml::stringize(array.type()) + "; fix it by hand" + kKeep);
    for (const std::string& w : wanted) {
      bool present = false;
      for (const Toml& v : array.as_array()) present = present || (v.is_string() && v.as_string().str == w);
      if (present) continue;
      array.as_array().push_back(Toml(w));
      if (report) notes_.push_back(path + "." + key + ": added \"" + w + "\"");
      changed_ = true;
    }
  }

  const std::string& source() const { return source_; }
  bool changed() const { return changed_; }
  std::vector<std::string>& notes() { return notes_; }

 private:
  // Equal values; comments do not count.
  static bool same(const Toml& a, const Toml& b) { return a.type() == b.type() && same_values(a, b); }
  static std::string shown(const Toml& v) { return toml::format(v, 0, 17, /*no_comment=*/true, true); }

  std::string source_;
  bool changed_ = false;
  std::vector<std::string> notes_;
};

Toml parse_toml_config(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  try {
    return toml::parse<toml::preserve_comments, tsl::ordered_map, std::vector>(in, source);
  } catch (const toml::exception& e) {
    throw usage_error(toml_error_line(e, source) + "; fix it by hand, containerd cannot read it either" + kKeep);
  } catch (const std::exception& e) {
    throw usage_error(source + ": malformed TOML: " + e.what() + kKeep);
  }
}

bool is_blank_line(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

bool is_comment_line(const std::string& line) {
  const auto first = line.find_first_not_of(" \t");
  return first != std::string::npos && line[first] == '#';
}

// A config file as read, with every comment: toml11 keeps a comment only when a key or a table
// header follows it with no blank line between, so it would drop a comment that a blank line
// follows, and the comments after the last key.
struct CommentedConfig {
  Toml doc;
  std::string tail;  // the comment lines after the last key, for the end of the file's text
};

// Parses `text` with the blank lines after each comment taken out (each comment then goes with
// the key or table below it) and without the comments it ends with (the tail), when the values
// read the same that way (a line of a multi-line string can look like a comment); else as it is.
CommentedConfig parse_commented_config(const std::string& text, const std::string& source) {
  CommentedConfig out{parse_toml_config(text, source), ""};
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::size_t end = lines.size();
  while (end > 0 && (is_blank_line(lines[end - 1]) || is_comment_line(lines[end - 1]))) --end;
  std::string body, tail;
  bool after_comment = false;
  for (std::size_t i = 0; i < end; ++i) {
    if (after_comment && is_blank_line(lines[i])) continue;
    after_comment = is_comment_line(lines[i]);
    body += lines[i] + "\n";
  }
  for (std::size_t i = end; i < lines.size(); ++i)
    if (is_comment_line(lines[i])) tail += lines[i].substr(lines[i].find('#')) + "\n";
  if (body == text && tail.empty()) return out;
  try {
    std::istringstream body_in(body);
    Toml doc = toml::parse<toml::preserve_comments, tsl::ordered_map, std::vector>(body_in, source);
    if (same_values(doc, out.doc)) return {std::move(doc), tail};
  } catch (const std::exception&) {
    // Another document: the text as it is.
  }
  return out;
}

// The config's version: 2 or 3. Refuses version 1 (and a file without a version, which
// containerd reads as version 1) and unknown versions.
int config_version(const Toml& doc, const std::string& source) {
  const std::string v1 =
      "; gpu-run-ctl edits versions 2 (containerd 1.x) and 3 (containerd 2.x): convert it (the layout is in "
      "`containerd config default`; containerd 2.x has `containerd config migrate`) and run again" +
      std::string(kKeep);
  if (!doc.contains("version"))
    throw usage_error(source + ": no `version = 2` line, so containerd reads it as config version 1" + v1);
  const Toml& version = doc.at("version");
  if (!version.is_integer())
    throw usage_error(source + ": key version: expected 2 or 3, got " + toml::stringize(version.type()) + kKeep);
  const auto number = version.as_integer();
  if (number == 2 || number == 3) return static_cast<int>(number);
  if (number == 1) throw usage_error(source + ": config version 1" + v1);
  throw usage_error(source + ": unknown config version " + std::to_string(number) +
                    "; gpu-run-ctl knows versions 2 (containerd 1.x) and 3 (containerd 2.x)" + kKeep);
}

// The file's text. Width 0: every table under its own [header], as containerd's own files
// are (toml11 would otherwise turn short tables into inline ones). toml11 leaves runs of empty
// lines after nested tables; they are squeezed to one when the result reads back the same
// (a multi-line string could hold such a run). `tail`, the comments the file ended with, ends it.
std::string format_config(const Toml& doc, const std::string& source, const std::string& tail) {
  const std::string text = toml::format(doc, 0);
  std::string squeezed;
  squeezed.reserve(text.size());
  for (const char c : text) {
    const auto n = squeezed.size();
    if (c == '\n' && n >= 2 && squeezed[n - 1] == '\n' && squeezed[n - 2] == '\n') continue;
    squeezed += c;
  }
  const std::string& kept =
      squeezed == text || toml::format(parse_toml_config(squeezed, source), 0) != text ? text : squeezed;
  if (tail.empty()) return kept;
  const bool blank_line_at_end = kept.size() >= 2 && kept.compare(kept.size() - 2, 2, "\n\n") == 0;
  return kept + (blank_line_at_end || kept.empty() ? "" : "\n") + tail;
}

}  // namespace

ContainerdEdit merge_containerd_config(const std::optional<std::string>& existing, const std::string& source,
                                       const std::string& runtime_path, const std::string& handler) {
  if (!is_k8s_dns_label(handler))
    throw usage_error("--handler '" + handler.substr(0, 64) +
                      "': expected a RuntimeClass handler name (lowercase letters, digits and '-', at most 63)");
  CommentedConfig read =
      existing ? parse_commented_config(*existing, source) : CommentedConfig{Toml(Toml::table_type{}), ""};
  Toml& doc = read.doc;
  ConfigEditor ed(source);
  ContainerdEdit result;
  if (doc.as_table().empty()) {
    // No file, or only comments: a new version 2 file, which containerd 1.6+ and 2.x read.
    ed.set(doc, "", "version", Toml(2), false);
    result.file.notes.push_back("created a version 2 config (containerd 1.x and 2.x read it)");
  }
  result.version = config_version(doc, source);

  const std::string plugin = cri_runtime_plugin(result.version);
  Toml& plugins = ed.table(doc, "", "plugins");
  const std::string plugin_path = "plugins." + header_key(plugin);
  Toml& cri = ed.table(plugins, "plugins", plugin);
  Toml& containerd = ed.table(cri, plugin_path, "containerd");
  const std::string containerd_path = plugin_path + ".containerd";
  Toml& runtimes = ed.table(containerd, containerd_path, "runtimes");
  const std::string runtimes_path = containerd_path + ".runtimes";

  std::string default_runtime = "runc";
  if (containerd.contains("default_runtime_name")) {
    const Toml& name = containerd.at("default_runtime_name");
    if (!name.is_string())
      throw usage_error(source + ": key " + containerd_path + ".default_runtime_name: expected a runtime name, got " +
                        toml::stringize(name.type()) + kKeep);
    default_runtime = name.as_string().str;
  }
  // A file's runtimes replace containerd's built-in ones (runc), and the CRI plugin does not
  // load when the default runtime has no table: measured with containerd 1.6.20.
  if (default_runtime != handler && !runtimes.contains(default_runtime)) {
    if (default_runtime != "runc")
      throw usage_error(source + ": " + containerd_path + ".default_runtime_name is \"" + default_runtime + "\" but " +
                        runtimes_path +
                        " has no table for it, so containerd's CRI plugin does not load; "
                        "add the table or fix the name, then run again" +
                        kKeep);
    Toml& runc = ed.table(runtimes, runtimes_path, "runc");
    ed.set(runc, runtimes_path + ".runc", "runtime_type", Toml(kRuncShim), false);
    result.file.notes.push_back("added " + runtimes_path +
                                ".runc (runtime_type \"io.containerd.runc.v2\", containerd's built-in default): once "
                                "the file names a runtime, containerd knows only the file's, and its CRI plugin "
                                "needs the default runtime \"runc\"");
  }

  const bool existed = runtimes.contains(handler);
  result.table = runtimes_path + "." + header_key(handler);
  Toml& entry = ed.table(runtimes, runtimes_path, handler);
  if (!existed) {
    entry.comments().push_back(" gpu-run: gpu-run-runtime sizes the pod's /dev/shm from its gpu-run.* annotations");
    entry.comments().push_back(" (written by `gpu-run-ctl configure containerd`; pods select it by a RuntimeClass)");
  }
  ed.set(entry, result.table, "runtime_type", Toml(kRuncShim), existed);
  ed.add_to_array(entry, result.table, "pod_annotations", request_annotation_globs(), existed);
  const std::string options_path = result.table + ".options";
  Toml& options = ed.table(entry, result.table, "options");
  ed.set(options, options_path, "BinaryName", Toml(runtime_path), existed);
  // The kubelet's cgroup driver is one for the node: a runc handler must use the same as the default runtime.
  if (default_runtime != handler && runtimes.contains(default_runtime)) {
    const Toml& base = runtimes.at(default_runtime);
    if (base.is_table() && base.contains("options") && base.at("options").is_table() &&
        base.at("options").contains("SystemdCgroup")) {
      const Toml systemd = base.at("options").at("SystemdCgroup");
      ed.set(options, options_path, "SystemdCgroup", systemd, existed);
    }
  }

  for (auto& n : ed.notes()) result.file.notes.push_back(n);
  result.file.changed = ed.changed() || !existing;
  result.file.text = format_config(doc, source, read.tail);
  return result;
}

void run_configure_containerd(const ConfigureContainerdOptions& o) {
  if (o.config && fs::path(*o.config).extension() == ".toml")
    throw usage_error("--config " + o.config->substr(0, 80) +
                      ": --config is gpu-run's config (JSON); give containerd's config.toml as --containerd-config");
  const fs::path runtime =
      gpu_run_binary(o.runtime_path, "gpu-run-runtime", "--runtime-path", fs::path(kFallbackRuntimePath));
  const fs::path config_file = config_path(o.config);
  const std::string missing_config = check_gpu_run_config(config_file);
  const fs::path config = o.containerd_config;
  const std::optional<std::string> existing = read_existing_file(config, "containerd config");
  const ContainerdEdit edit = merge_containerd_config(existing, config.string(), runtime.string(), o.handler);
  const FileEdit& file = edit.file;

  if (o.dry_run) {
    report_dry_run(config, file.changed || !existing ? file.text : *existing, file, "TOML");
    std::cerr << runtime_config_note(config_file, "containerd", "containerd") << missing_config;
    return;
  }
  if (!file.changed) {
    std::cout << config.string() << ": already configured ([" << edit.table << "] runs " << runtime.string()
              << "); nothing changed\n";
    return;
  }
  const std::optional<fs::path> backup = replace_file_with_backup(config, file.text, existing);
  std::cout << "wrote " << config.string() << ": runtime handler " << o.handler << " ([" << edit.table << "], "
            << "BinaryName = " << runtime.string() << ")\n";
  if (backup) std::cout << "backup of the previous file: " << backup->string() << "\n";
  for (const auto& n : file.notes) std::cout << "note: " << n << "\n";
  std::cout << "containerd reads its config only at start: run `systemctl restart containerd` (running containers "
               "keep running)\n"
               "then create the RuntimeClass once per cluster: `gpu-run-ctl k8s runtimeclass"
            << (o.handler == kDefaultRuntimeHandler ? "" : " --handler " + o.handler)
            << " | kubectl apply -f -`, and give pods `runtimeClassName: " << o.handler
            << "` and an annotation such as `gpu-run.profile: imagenet`\n"
            << "and label this node (its name in `kubectl get nodes`), as the RuntimeClass schedules only onto "
               "labelled nodes: `kubectl label node <node> "
            << kRuntimeNodeLabel << "=" << o.handler << "`\n";
  std::cout << runtime_config_note(config_file, "containerd", "containerd") << missing_config;
}

void add_configure_containerd_command(CLI::App& configure) {
  auto o = std::make_shared<ConfigureContainerdOptions>();
  CLI::App* cmd = configure.add_subcommand(
      "containerd", "Add a CRI runtime handler running gpu-run-runtime to containerd's config.toml");
  cmd->add_option("--containerd-config", o->containerd_config, "containerd's config.toml to edit")
      ->type_name("PATH")
      ->capture_default_str();
  cmd->add_flag("--dry-run,--print", o->dry_run, "Print the resulting config.toml and write nothing");
  cmd->add_option(
         "--config", o->config,
         "The gpu-run config the runtime should read (default: $GPU_RUN_CONFIG, else /etc/gpu-run/config.json)")
      ->type_name("PATH");
  cmd->add_option("--runtime-path", o->runtime_path,
                  "gpu-run-runtime to run (default: next to gpu-run-ctl, else /usr/bin/gpu-run-runtime)")
      ->type_name("PATH");
  cmd->add_option("--handler", o->handler, "Name of the runtime handler (the RuntimeClass's handler)")
      ->type_name("NAME")
      ->capture_default_str();
  cmd->footer(
      "Adds [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.gpu-run] (config version 2,\n"
      "containerd 1.x; version 3, containerd 2.x: plugins.\"io.containerd.cri.v1.runtime\"): runtime_type\n"
      "io.containerd.runc.v2, options.BinaryName = gpu-run-runtime, and pod_annotations \"gpu-run.*\" and\n"
      "\"io.kubernetes.cri-o.ShmSize\" so the pod's annotations reach the OCI spec. A missing file becomes a\n"
      "version 2 config; a file without a table for the default runtime gets runc's (containerd drops its\n"
      "built-in runc once the file names a runtime). Comments and other settings are kept; the previous\n"
      "file is saved as <config>.gpu-run.bak and the new one replaces it atomically. Running it again\n"
      "changes nothing. A malformed file, or config version 1, is reported and never overwritten.\n"
      "containerd reads its config at start: `systemctl restart containerd`. gpu-run-runtime reads\n"
      "$GPU_RUN_CONFIG from containerd's environment, else /etc/gpu-run/config.json (printed, with a\n"
      "systemd drop-in, when --config names another file).");
  cmd->callback([o] { run_configure_containerd(*o); });
}

}  // namespace gpurun
