#include "ctl/configure/configure_containerd.hpp"

#include <fnmatch.h>
#include <glob.h>
#include <tsl/ordered_map.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <toml.hpp>
#include <vector>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/configure/chain.hpp"
#include "decision/contract.hpp"

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

namespace {

void check_handler_name(const std::string& handler) {
  if (!is_k8s_dns_label(handler))
    throw usage_error("--handler '" + handler.substr(0, 64) +
                      "': expected a RuntimeClass handler name (lowercase letters, digits and '-', at most 63)");
}

// Where a config's CRI runtime handlers are, per version.
struct CriPaths {
  std::string plugin;      // io.containerd.grpc.v1.cri, io.containerd.cri.v1.runtime
  std::string containerd;  // plugins."<plugin>".containerd
  std::string runtimes;    // <containerd>.runtimes
};

CriPaths cri_paths(int version) {
  CriPaths p;
  p.plugin = cri_runtime_plugin(version);
  p.containerd = "plugins." + header_key(p.plugin) + ".containerd";
  p.runtimes = p.containerd + ".runtimes";
  return p;
}

// The table at `keys` below `doc`, when every step is a table.
const Toml* find_table(const Toml& doc, const std::vector<std::string>& keys) {
  const Toml* at = &doc;
  for (const std::string& k : keys) {
    if (!at->is_table() || !at->contains(k)) return nullptr;
    at = &at->at(k);
  }
  return at->is_table() ? at : nullptr;
}

std::vector<std::string> runtimes_keys(const CriPaths& p) { return {"plugins", p.plugin, "containerd", "runtimes"}; }

// containerd's default_runtime_name (runc when unset); Error for another type.
std::string default_runtime_name(const Toml& doc, const CriPaths& p, const std::string& source) {
  const Toml* containerd = find_table(doc, {"plugins", p.plugin, "containerd"});
  if (!containerd || !containerd->contains("default_runtime_name")) return "runc";
  const Toml& name = containerd->at("default_runtime_name");
  if (!name.is_string())
    throw usage_error(source + ": key " + p.containerd + ".default_runtime_name: expected a runtime name, got " +
                      toml::stringize(name.type()) + kKeep);
  return name.as_string().str;
}

// The options.BinaryName of a handler table, "" when it has none.
std::string binary_name(const Toml& handler_table) {
  if (!handler_table.contains("options") || !handler_table.at("options").is_table()) return "";
  const Toml& options = handler_table.at("options");
  if (!options.contains("BinaryName") || !options.at("BinaryName").is_string()) return "";
  return options.at("BinaryName").as_string().str;
}

// The runc table gpu-run-ctl adds when the file has none for the default runtime runc.
Toml added_runc_table() {
  Toml runc(Toml::table_type{});
  runc.as_table()["runtime_type"] = Toml(kRuncShim);
  return runc;
}

// Equal values whatever the order of keys in tables (another writer, the GPU Operator's
// toolkit, orders them its way); comments do not count.
bool equal_values(const Toml& a, const Toml& b) {
  if (a.type() != b.type()) return false;
  if (a.is_table()) {
    if (a.as_table().size() != b.as_table().size()) return false;
    for (const auto& [key, value] : a.as_table())
      if (!b.contains(key) || !equal_values(value, b.at(key))) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.as_array().size() != b.as_array().size()) return false;
    for (std::size_t i = 0; i < a.as_array().size(); ++i)
      if (!equal_values(a.as_array()[i], b.as_array()[i])) return false;
    return true;
  }
  return same_values(a, b);
}

// The first place `after` differs from `before`, as a dotted key ("key plugins.x.y added"); ""
// when they are equal.
std::string toml_difference(const Toml& before, const Toml& after, const std::string& prefix = "") {
  for (const auto& [key, value] : after.as_table()) {
    const std::string name = prefix + header_key(key);
    if (!before.contains(key)) return "key " + name + " added";
    const Toml& old = before.at(key);
    if (equal_values(old, value)) continue;
    if (value.is_table() && old.is_table()) return toml_difference(old, value, name + ".");
    return "key " + name + " changed";
  }
  for (const auto& [key, value] : before.as_table())
    if (!after.contains(key)) return "key " + prefix + header_key(key) + " removed";
  return "";
}

}  // namespace

namespace {

// The runtime gpu-run's handler chains in the merged document `doc` (version `version`; an
// empty document: none): `chain` when given, else the default handler. `source` names where
// the CRI section comes from in messages.
DefaultRuntime runtime_to_chain(const Toml& doc, int version, const std::string& source, const std::string& handler,
                                const std::optional<std::string>& chain) {
  check_handler_name(handler);
  DefaultRuntime d;
  d.name = "runc";
  d.where = "containerd's runc";
  const CriPaths p = cri_paths(version == 0 ? 2 : version);
  const Toml* runtimes = version == 0 ? nullptr : find_table(doc, runtimes_keys(p));
  if (chain) {
    if (*chain == handler)
      throw usage_error("--chain " + *chain +
                        ": that is gpu-run's own handler (--handler); name the handler it "
                        "should run next, e.g. nvidia");
    if (!runtimes || !runtimes->contains(*chain)) {
      std::string known;
      if (runtimes)
        for (const auto& [name, table] : runtimes->as_table()) known += (known.empty() ? "" : ", ") + name;
      throw usage_error("--chain " + chain->substr(0, 64) + ": " + source + " has no [" + p.runtimes + "." +
                        header_key(*chain) + "] (its handlers: " + (known.empty() ? "none" : known) + ")" + kKeep);
    }
    d.name = *chain;
  } else if (version != 0) {
    d.name = default_runtime_name(doc, p, source);
  }
  if (version == 0) return d;
  const std::string table = p.runtimes + "." + header_key(d.name);
  d.where = chain ? "containerd's handler \"" + d.name + "\" ([" + table + "], --chain)"
                  : "containerd's default runtime \"" + d.name + "\" ([" + table + "])";
  if (d.name == handler) {
    d.is_entry = true;
    if (runtimes && runtimes->contains(d.name)) d.binary = binary_name(runtimes->at(d.name));
    return d;
  }
  if (!runtimes || !runtimes->contains(d.name)) {
    // runc without a table: containerd's built-in, which merge_containerd_config writes.
    if (d.name == "runc") return d;
    throw usage_error(source + ": " + p.containerd + ".default_runtime_name is \"" + d.name + "\" but " + p.runtimes +
                      " has no table for it, so containerd's CRI plugin does not load; "
                      "add the table or fix the name, then run again" +
                      kKeep);
  }
  const Toml& base = runtimes->at(d.name);
  if (!base.is_table())
    throw usage_error(source + ": key " + table + ": expected a table, got " + toml::stringize(base.type()) + kKeep);
  const std::string type = base.contains("runtime_type") && base.at("runtime_type").is_string()
                               ? base.at("runtime_type").as_string().str
                               : "";
  if (type != kRuncShim && type != "io.containerd.runc.v1")
    throw usage_error(
        source + ": the " + (chain ? "handler" : "default runtime") + " \"" + d.name + "\" has runtime_type \"" + type +
        "\", not the runc shim (io.containerd.runc.v2) whose options.BinaryName gpu-run-runtime can "
        "chain; " +
        (chain ? "chain a runc-shim handler" : "make a runc-shim handler the default") + ", then run again" + kKeep);
  d.binary = binary_name(base);
  if (!d.binary.empty())
    d.where = chain ? "containerd's handler \"" + d.name + "\" (its options.BinaryName, --chain)"
                    : "containerd's default runtime \"" + d.name + "\" (its options.BinaryName)";
  return d;
}

std::vector<NamedRuntime> runtimes_of(const Toml& doc, int version) {
  std::vector<NamedRuntime> out;
  if (version == 0) return out;
  const Toml* runtimes = find_table(doc, runtimes_keys(cri_paths(version)));
  if (!runtimes) return out;
  for (const auto& [name, table] : runtimes->as_table())
    out.push_back({name, table.is_table() ? binary_name(table) : std::string()});
  return out;
}

// Adds or updates gpu-run's handler in `doc` (version `version`), with the settings of `chained`'s
// table in `effective` (what containerd makes of every file), and runc's table when `effective`
// has none for a runc default.
void edit_handler(Toml& doc, const Toml& effective, int version, const std::string& chained,
                  const std::string& entry_binary, const std::string& handler, ConfigEditor& ed,
                  ContainerdEdit& result) {
  const std::string& source = ed.source();
  const CriPaths p = cri_paths(version);
  const Toml* effective_runtimes = find_table(effective, runtimes_keys(p));
  const bool chained_has_table = effective_runtimes && effective_runtimes->contains(chained);

  Toml& plugins = ed.table(doc, "", "plugins");
  Toml& cri = ed.table(plugins, "plugins", p.plugin);
  Toml& containerd = ed.table(cri, "plugins." + header_key(p.plugin), "containerd");
  Toml& runtimes = ed.table(containerd, p.containerd, "runtimes");

  // A file's runtimes replace containerd's built-in ones (runc), and the CRI plugin does not
  // load when the default runtime has no table: measured with containerd 1.6.20.
  if (chained != handler && !chained_has_table) {
    if (chained != "runc")
      throw usage_error(source + ": " + p.containerd + ".default_runtime_name is \"" + chained + "\" but " +
                        p.runtimes +
                        " has no table for it, so containerd's CRI plugin does not load; "
                        "add the table or fix the name, then run again" +
                        kKeep);
    Toml& runc = ed.table(runtimes, p.runtimes, "runc");
    ed.set(runc, p.runtimes + ".runc", "runtime_type", Toml(kRuncShim), false);
    result.file.notes.push_back("added " + p.runtimes +
                                ".runc (runtime_type \"io.containerd.runc.v2\", containerd's built-in default): once "
                                "the file names a runtime, containerd knows only the file's, and its CRI plugin "
                                "needs the default runtime \"runc\"");
  }
  // A copy: adding the handler's table below may move the tables of `runtimes`.
  const std::optional<Toml> base = chained != handler && chained_has_table && effective_runtimes->at(chained).is_table()
                                       ? std::optional<Toml>(effective_runtimes->at(chained))
                                       : std::nullopt;

  const bool existed = runtimes.contains(handler);
  result.file.first = !existed;
  result.table = p.runtimes + "." + header_key(handler);
  Toml& entry = ed.table(runtimes, p.runtimes, handler);
  if (!existed) {
    entry.comments().push_back(" gpu-run: gpu-run-runtime sizes the pod's /dev/shm from its gpu-run.* annotations");
    entry.comments().push_back(" (written by `gpu-run-ctl configure containerd`; pods select it by a RuntimeClass)");
  }
  ed.set(entry, result.table, "runtime_type", Toml(kRuncShim), existed);
  ed.add_to_array(entry, result.table, "pod_annotations", request_annotation_globs(), existed);
  const std::string options_path = result.table + ".options";
  Toml& options = ed.table(entry, result.table, "options");
  ed.set(options, options_path, "BinaryName", Toml(entry_binary), existed);
  // What the chained runtime's containers get, the chained runtime gets here: the handler's
  // settings (privileged_without_host_devices, base_runtime_spec, ...) and its runc options
  // (SystemdCgroup, the node's cgroup driver; Root; ...), all but the binary.
  if (base) {
    for (const auto& [key, value] : base->as_table()) {
      if (key == "runtime_type" || key == "options") continue;
      if (value.is_array() && (key == "pod_annotations" || key == "container_annotations")) {
        std::vector<std::string> names;
        for (const Toml& v : value.as_array())
          if (v.is_string()) names.push_back(v.as_string().str);
        ed.add_to_array(entry, result.table, key, names, existed);
        continue;
      }
      ed.set(entry, result.table, key, value, existed);
    }
    if (base->contains("options") && base->at("options").is_table()) {
      for (const auto& [key, value] : base->at("options").as_table())
        if (key != "BinaryName") ed.set(options, options_path, key, value, existed);
    }
  }
}

}  // namespace

DefaultRuntime containerd_default_runtime(const std::optional<std::string>& existing, const std::string& source,
                                          const std::string& handler) {
  return containerd_chained_runtime(single_containerd_source(existing, source), handler, std::nullopt);
}

std::vector<NamedRuntime> containerd_runtimes(const std::optional<std::string>& existing, const std::string& source) {
  std::vector<NamedRuntime> out;
  if (!existing) return out;
  const Toml doc = parse_toml_config(*existing, source);
  if (doc.as_table().empty()) return out;
  return runtimes_of(doc, config_version(doc, source));
}

ContainerdEdit merge_containerd_config(const std::optional<std::string>& existing, const std::string& source,
                                       const std::string& entry_binary, const std::string& handler) {
  check_handler_name(handler);
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
  const std::string default_runtime = default_runtime_name(doc, cri_paths(result.version), source);
  const Toml effective = doc;
  edit_handler(doc, effective, result.version, default_runtime, entry_binary, handler, ed, result);
  for (auto& n : ed.notes()) result.file.notes.push_back(n);
  result.file.changed = ed.changed() || !existing;
  result.file.text = format_config(doc, source, read.tail);
  return result;
}

namespace {

constexpr const char* kDropinMark = "# Written by `gpu-run-ctl configure containerd`";
constexpr std::size_t kMaxSources = 256;

std::vector<std::string> import_strings(const Toml& doc, const std::string& source) {
  std::vector<std::string> out;
  if (!doc.contains("imports")) return out;
  const Toml& imports = doc.at("imports");
  if (!imports.is_array())
    throw usage_error(source + ": key imports: expected an array of paths, got " + toml::stringize(imports.type()) +
                      kKeep);
  for (const Toml& v : imports.as_array()) {
    if (!v.is_string())
      throw usage_error(source + ": key imports: expected paths (strings), got " + toml::stringize(v.type()) + kKeep);
    out.push_back(v.as_string().str);
  }
  return out;
}

// An import as containerd 1.6.29+, 1.7.16+ and 2.x resolve it: a relative path from the
// importing file's directory (older releases glob a relative pattern from their working
// directory; gpu-run-ctl reads what the fixed ones read).
fs::path resolved_import(const std::string& import, const fs::path& parent) {
  const fs::path path = fs::path(import).lexically_normal();
  return path.is_absolute() ? path : (parent.parent_path() / path).lexically_normal();
}

// A host path as read here: below `root` when one is given.
fs::path below_root(const fs::path& root, const fs::path& path) {
  if (root.empty() || root == "/" || !path.is_absolute()) return path;
  return root / path.relative_path();
}

std::vector<std::string> glob_paths(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  ::globfree(&g);
  // Go's filepath.Glob sorts by bytes, whatever the locale.
  std::sort(out.begin(), out.end());
  return out;
}

// The import of config.toml (its last directory glob) that gpu-run's drop-in `name` goes under:
// a glob in the file name only, which the name matches.
std::optional<std::size_t> dropin_import(const std::vector<std::string>& imports, const std::string& name) {
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < imports.size(); ++i) {
    const fs::path import(imports[i]);
    const std::string dir = import.parent_path().string(), file = import.filename().string();
    if (file.find('*') == std::string::npos || dir.find_first_of("*?[") != std::string::npos) continue;
    if (::fnmatch(file.c_str(), name.c_str(), FNM_PERIOD) == 0) found = i;
  }
  return found;
}

// The merged document of `docs` as containerd merges them: a plugin's whole section from the
// last file that has it (1.x), or key by key (2.x, `deep`); other keys key by key.
void merge_into(Toml& to, const Toml& from) {
  for (const auto& [key, value] : from.as_table()) {
    if (value.is_table() && to.contains(key) && to.at(key).is_table())
      merge_into(to.as_table()[key], value);
    else
      to.as_table()[key] = value;
  }
}

Toml merged(const std::vector<const Toml*>& docs, bool deep) {
  Toml out(Toml::table_type{});
  for (const Toml* doc : docs) {
    for (const auto& [key, value] : doc->as_table()) {
      if (key == "imports") continue;
      if (key == "plugins" && value.is_table() && !deep) {
        if (!out.contains("plugins") || !out.at("plugins").is_table()) out.as_table()["plugins"] = Toml::table_type{};
        for (const auto& [plugin, section] : value.as_table()) out.as_table()["plugins"].as_table()[plugin] = section;
      } else if (value.is_table() && out.contains(key) && out.at(key).is_table()) {
        merge_into(out.as_table()[key], value);
      } else {
        out.as_table()[key] = value;
      }
    }
  }
  return out;
}

// What containerd makes of the sources.
struct Effective {
  int version = 0;                       // config.toml's: 2 (containerd 1.x), 3 (2.x); 0: no config
  Toml before = Toml::table_type{};      // every file before gpu-run's drop-in (all of them when there is none)
  Toml all = Toml::table_type{};         // every file
  std::string cri_from;                  // 1.x: the file before the drop-in whose CRI section containerd takes
  std::vector<std::string> cri_after;    // 1.x: files after the drop-in that replace the CRI section
  std::vector<std::string> cri_imports;  // 1.x: imports that replace config.toml's CRI section
  const ContainerdSource* dropin = nullptr;
  std::optional<Toml> dropin_doc;  // the drop-in as it is
};

bool has_plugin(const Toml& doc, const std::string& plugin) {
  return doc.contains("plugins") && doc.at("plugins").is_table() && doc.at("plugins").contains(plugin);
}

Effective effective_of(const ContainerdSources& sources) {
  Effective e;
  if (sources.files.empty() || !sources.files[0].text) return e;
  std::vector<Toml> docs;
  docs.reserve(sources.files.size());
  for (const ContainerdSource& f : sources.files)
    docs.push_back(f.text ? parse_toml_config(*f.text, f.path) : Toml(Toml::table_type{}));
  if (docs[0].as_table().empty()) return e;
  e.version = config_version(docs[0], sources.files[0].path);
  const bool deep = e.version == 3;
  const std::string plugin = cri_runtime_plugin(e.version);
  std::vector<const Toml*> before, all;
  bool past = false;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const ContainerdSource& f = sources.files[i];
    all.push_back(&docs[i]);
    if (f.dropin) {
      e.dropin = &f;
      if (f.text) e.dropin_doc = docs[i];
      past = true;
      continue;
    }
    const bool cri = has_plugin(docs[i], plugin);
    if (past) {
      if (cri && !deep) e.cri_after.push_back(f.path);
      continue;
    }
    before.push_back(&docs[i]);
    if (cri) e.cri_from = f.path;
    if (cri && i > 0 && !deep) e.cri_imports.push_back(f.path);
  }
  e.before = merged(before, deep);
  e.all = merged(all, deep);
  return e;
}

// The CRI section of `doc` alone, as a document of its own.
Toml cri_document(const Toml& doc, int version) {
  Toml out(Toml::table_type{});
  out.as_table()["version"] = Toml(version);
  const std::string plugin = cri_runtime_plugin(version);
  if (has_plugin(doc, plugin)) {
    Toml plugins(Toml::table_type{});
    plugins.as_table()[plugin] = doc.at("plugins").at(plugin);
    out.as_table()["plugins"] = plugins;
  }
  return out;
}

// The drop-in's CRI section without what gpu-run added (its handler; runc's table where the
// files before it have none), to set against what they say now.
std::string dropin_difference(const Effective& e, const std::string& handler) {
  if (!e.dropin_doc || e.version != 2) return "";
  const CriPaths p = cri_paths(e.version);
  Toml copied = cri_document(*e.dropin_doc, e.version);
  const Toml now = cri_document(e.before, e.version);
  if (find_table(copied, runtimes_keys(p))) {
    Toml* runtimes = &copied;
    for (const std::string& k : runtimes_keys(p)) runtimes = &runtimes->as_table()[k];
    runtimes->as_table().erase(handler);
    const Toml* before_runtimes = find_table(now, runtimes_keys(p));
    if (!(before_runtimes && before_runtimes->contains("runc")) && runtimes->contains("runc") &&
        equal_values(runtimes->at("runc"), added_runc_table()))
      runtimes->as_table().erase("runc");
  }
  return toml_difference(copied, now);
}

std::string where_cri(const Effective& e) { return e.cri_from.empty() ? "containerd's built-in defaults" : e.cri_from; }

}  // namespace

std::string containerd_dropin_name(const std::string& handler) {
  return handler == kDefaultRuntimeHandler ? "99-zz-gpu-run.toml" : "99-zz-gpu-run-" + handler + ".toml";
}

ContainerdSources single_containerd_source(const std::optional<std::string>& existing, const std::string& source) {
  return ContainerdSources{{ContainerdSource{source, existing, false}}};
}

ContainerdSources read_containerd_sources(const fs::path& config, const std::string& handler,
                                          const fs::path& host_root) {
  check_handler_name(handler);
  ContainerdSources out;
  out.files.push_back({config.string(), read_existing_file(config, "containerd config"), false});
  if (!out.files[0].text) return out;
  const std::string name = containerd_dropin_name(handler);
  std::optional<std::string> dropin;
  std::set<std::string> loaded{config.string()};
  // Breadth first: a file's imports go to the end of the queue (containerd's LoadConfig).
  for (std::size_t next = 0; next < out.files.size(); ++next) {
    const ContainerdSource current = out.files[next];
    if (!current.text) continue;
    const Toml doc = parse_toml_config(*current.text, current.path);
    const std::vector<std::string> imports = import_strings(doc, current.path);
    const std::optional<std::size_t> here = next == 0 ? dropin_import(imports, name) : std::nullopt;
    for (std::size_t i = 0; i < imports.size(); ++i) {
      const fs::path import = resolved_import(imports[i], current.path);
      std::vector<std::string> paths;
      if (imports[i].find('*') != std::string::npos) {
        const fs::path pattern = below_root(host_root, import);
        paths = glob_paths(pattern.string());
        if (here && *here == i) {
          dropin = (pattern.parent_path() / name).string();
          if (std::find(paths.begin(), paths.end(), *dropin) == paths.end()) paths.push_back(*dropin);
          std::sort(paths.begin(), paths.end());
        }
      } else {
        paths.push_back(below_root(host_root, import).string());
      }
      for (const std::string& path : paths) {
        if (!loaded.insert(path).second) continue;
        if (out.files.size() >= kMaxSources)
          throw usage_error(config.string() + ": its imports name more than " + std::to_string(kMaxSources) + " files" +
                            kKeep);
        ContainerdSource s{path, read_existing_file(path, "containerd config"), dropin && path == *dropin};
        if (!s.text && !s.dropin)
          throw usage_error(current.path + ": imports " + imports[i] + ", which does not exist (" + path +
                            "): containerd does not start with it either; fix the import" + kKeep);
        out.files.push_back(std::move(s));
      }
    }
  }
  return out;
}

DefaultRuntime containerd_chained_runtime(const ContainerdSources& sources, const std::string& handler,
                                          const std::optional<std::string>& chain) {
  const Effective e = effective_of(sources);
  const std::string source = sources.files.empty() ? "" : sources.files[0].path;
  // With a drop-in, gpu-run's handler lives there and nowhere else: what the files before it say.
  DefaultRuntime d = runtime_to_chain(e.dropin ? e.before : e.all, e.version, source, handler, chain);
  if (!d.binary.empty() && !d.is_entry && e.cri_from != source && !e.cri_from.empty()) d.where += " in " + e.cri_from;
  return d;
}

std::vector<NamedRuntime> containerd_effective_runtimes(const ContainerdSources& sources) {
  const Effective e = effective_of(sources);
  return runtimes_of(e.all, e.version);
}

std::string bypassed_gpu_handlers(const std::vector<NamedRuntime>& runtimes, const std::string& chained) {
  std::string out;
  for (const NamedRuntime& r : runtimes) {
    if (r.binary.empty() || fs::path(r.binary).filename().string().rfind("nvidia-container-runtime", 0) != 0) continue;
    if (!chained.empty() && (r.binary == chained || fs::path(r.binary) == fs::path(chained))) return "";
    out += (out.empty() ? "" : ", ") + std::string("\"") + r.name + "\" (" + r.binary + ")";
  }
  return out;
}

std::string containerd_dropin_stale(const ContainerdSources& sources, const std::string& handler) {
  try {
    return dropin_difference(effective_of(sources), handler);
  } catch (const Error&) {
    return "";
  }
}

ContainerdPlan plan_containerd(const ContainerdSources& sources, const std::string& entry_binary,
                               const std::string& handler, const std::optional<std::string>& chain) {
  check_handler_name(handler);
  const Effective e = effective_of(sources);
  const std::string source = sources.files.empty() ? "" : sources.files[0].path;
  ContainerdPlan plan;
  const DefaultRuntime chained = containerd_chained_runtime(sources, handler, chain);
  const std::vector<NamedRuntime> handlers = runtimes_of(e.dropin ? e.before : e.all, e.version);
  if (!chained.is_entry) {
    if (const std::string gpu = bypassed_gpu_handlers(handlers, chained.binary); !gpu.empty())
      plan.warnings.push_back("gpu-run's handler \"" + handler + "\" chains " + chained.name + " (" +
                              (chained.binary.empty() ? std::string("containerd's runc") : chained.binary) +
                              ") while the handler " + gpu +
                              " runs NVIDIA's runtime: pods on gpu-run's handler start without it; chain it with "
                              "--chain NAME (or make it the default)");
  }
  if (!e.dropin) {
    if (!e.cri_imports.empty())
      throw usage_error(source + ": its import " + e.cri_imports.back() + " replaces the whole " +
                        cri_runtime_plugin(e.version) +
                        " section (containerd 1.x merges no deeper), so a handler added to " + source +
                        " would be lost; import a directory (imports = [\"/etc/containerd/conf.d/*.toml\"]) for "
                        "gpu-run's drop-in, read last, then run again" +
                        kKeep);
    plan.path = source;
    const std::optional<std::string>& text = sources.files.empty() ? std::nullopt : sources.files[0].text;
    // The chained handler's settings come from what containerd makes of every file.
    CommentedConfig read = text ? parse_commented_config(*text, source) : CommentedConfig{Toml(Toml::table_type{}), ""};
    Toml& doc = read.doc;
    ConfigEditor ed(source);
    ContainerdEdit& result = plan.edit;
    if (doc.as_table().empty()) {
      ed.set(doc, "", "version", Toml(2), false);
      result.file.notes.push_back("created a version 2 config (containerd 1.x and 2.x read it)");
    }
    result.version = config_version(doc, source);
    const Toml effective = e.version == 0 ? doc : e.all;
    edit_handler(doc, effective, result.version, chained.name, entry_binary, handler, ed, result);
    for (auto& n : ed.notes()) result.file.notes.push_back(n);
    result.file.changed = ed.changed() || !text;
    result.file.text = format_config(doc, source, read.tail);
  } else {
    plan.dropin = true;
    plan.path = e.dropin->path;
    if (!e.cri_after.empty())
      throw usage_error(e.cri_after.back() + " is read after gpu-run's drop-in " + e.dropin->path +
                        " and replaces the whole " + cri_runtime_plugin(e.version) +
                        " section (containerd 1.x merges no deeper), so gpu-run's handler would be lost; rename it "
                        "to sort before " +
                        fs::path(e.dropin->path).filename().string() + ", then run again" + kKeep);
    // containerd 1.x: the whole CRI section the files before it add up to, and the handler;
    // 2.x merges key by key: the handler alone.
    Toml doc = e.version == 2 ? cri_document(e.before, 2) : cri_document(Toml(Toml::table_type{}), e.version);
    ConfigEditor ed(e.dropin->path);
    ContainerdEdit& result = plan.edit;
    result.version = e.version;
    edit_handler(doc, e.before, e.version, chained.name, entry_binary, handler, ed, result);
    plan.stale = dropin_difference(e, handler);
    std::vector<std::string> head = {
        std::string(kDropinMark) + " for the runtime handler \"" + handler + "\"",
        "# (gpu-run-runtime sizes a pod's /dev/shm; pods select it by a RuntimeClass). Named to be read last.",
    };
    if (e.version == 2) {
      head.push_back("# containerd 1.x takes a plugin's whole section from the last file that has it, so this file");
      head.push_back("# carries the CRI section of " + where_cri(e) + " as containerd read it, and the handler:");
      head.push_back("# run `gpu-run-ctl configure containerd` again after another tool changes that section.");
    }
    head.push_back("# `gpu-run-ctl configure containerd --undo` removes this file; " + source + " is not changed.");
    std::string text;
    for (const std::string& line : head) text += line + "\n";
    result.file.text = text + "\n" + format_config(doc, e.dropin->path, "");
    result.file.first = !e.dropin_doc;
    result.file.changed = !e.dropin->text || *e.dropin->text != result.file.text;
    result.file.notes.clear();
    if (e.version == 2)
      result.file.notes.push_back("the drop-in carries the CRI section of " + where_cri(e) +
                                  " (containerd 1.x replaces a plugin's whole section with an imported file's)");
  }
  // GPUs through CDI: containerd injects the devices itself, no NVIDIA handler to chain.
  if (!chained.is_entry && bypassed_gpu_handlers(handlers, "").empty() &&
      fs::path(chained.binary).filename().string().rfind("nvidia-container-runtime", 0) != 0) {
    const CriPaths p = cri_paths(e.version == 0 ? 2 : e.version);
    const Toml* cri = find_table(e.dropin ? e.before : e.all, {"plugins", p.plugin});
    const bool cdi = cri && cri->contains("enable_cdi")
                         ? cri->at("enable_cdi").is_boolean() && cri->at("enable_cdi").as_boolean()
                         : e.version == 3;
    if (cdi)
      plan.edit.file.notes.push_back(
          "the chain is " + (chained.binary.empty() ? std::string("runc") : chained.binary) +
          ": containerd has CDI on (" +
          (cri && cri->contains("enable_cdi") ? "enable_cdi = true" : std::string("containerd 2.x's default")) +
          ") and no handler runs NVIDIA's runtime, so GPUs reach pods as CDI devices that containerd itself adds "
          "to the spec; gpu-run-runtime needs no NVIDIA runtime after it");
  }
  return plan;
}

UndoEdit undo_containerd_config(const std::optional<std::string>& current, const std::optional<std::string>& backup,
                                const std::string& source, const std::string& handler) {
  check_handler_name(handler);
  UndoEdit undo;
  if (!current) {
    undo.said = source + " does not exist: nothing to undo";
    return undo;
  }
  Toml after = parse_toml_config(*current, source);
  const CriPaths p = after.as_table().empty() ? cri_paths(2) : cri_paths(config_version(after, source));
  const std::string table = p.runtimes + "." + header_key(handler);
  const Toml* handlers = find_table(after, runtimes_keys(p));
  if (!handlers || !handlers->contains(handler)) {
    undo.said = source + " has no [" + table + "]: nothing to undo";
    return undo;
  }
  const std::string bak = backup_path(source).string();
  const std::string by_hand = "remove [" + table + "] by hand";
  const std::optional<Toml> before = backup ? std::optional<Toml>(parse_toml_config(*backup, bak)) : std::nullopt;
  if (before) {
    const Toml* old = find_table(*before, runtimes_keys(p));
    if (old && old->contains(handler))
      throw usage_error(bak + " has [" + table + "] too (an older gpu-run-ctl kept it): " + by_hand +
                        " (gpu-run-ctl leaves both files as they are)");
  }
  undo.entry_binary = binary_name(handlers->at(handler));

  // Take out what configure added: the handler, runc's table when the file had none, the
  // tables on the way that were not there, and the version line of a file it created.
  const std::vector<std::string> keys = runtimes_keys(p);
  Toml* runtimes = &after;
  for (const std::string& k : keys) runtimes = &runtimes->as_table()[k];
  runtimes->as_table().erase(handler);
  const bool before_has_runc = before && find_table(*before, keys) && find_table(*before, keys)->contains("runc");
  if (!before_has_runc && runtimes->contains("runc") && runtimes->at("runc").is_table() &&
      equal_values(runtimes->at("runc"), added_runc_table()))
    runtimes->as_table().erase("runc");
  for (std::size_t depth = keys.size(); depth > 0; --depth) {
    const std::vector<std::string> path(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(depth));
    const std::vector<std::string> parent_path(path.begin(), path.end() - 1);
    Toml* parent = &after;
    for (const std::string& k : parent_path) parent = &parent->as_table()[k];
    const Toml& child = parent->at(path.back());
    if (child.is_table() && child.as_table().empty() && !(before && find_table(*before, path)))
      parent->as_table().erase(path.back());
  }
  const bool before_empty = !before || before->as_table().empty();
  if (before_empty && after.contains("version") && after.as_table().size() == 1) after.as_table().erase("version");

  if (!before) {
    if (after.as_table().empty()) {
      undo.kind = UndoEdit::kRemove;
      undo.said = "removed (gpu-run-ctl configure created it)";
      return undo;
    }
    throw usage_error(source + ": no backup " + bak +
                      " to restore (it was removed, or the handler was not added by gpu-run-ctl configure): " +
                      by_hand + " (gpu-run-ctl leaves the file as it is)");
  }
  UndoEdit restore = restore_unless_changed(source, toml_difference(*before, after), by_hand, bak, *backup);
  restore.entry_binary = undo.entry_binary;
  return restore;
}

UndoEdit undo_containerd_dropin(const std::optional<std::string>& text, const std::string& path,
                                const std::string& handler) {
  check_handler_name(handler);
  UndoEdit undo;
  if (!text) {
    undo.said = path + " does not exist: nothing to undo";
    return undo;
  }
  if (text->rfind(kDropinMark, 0) != 0)
    throw usage_error(path + ": not a drop-in gpu-run-ctl configure wrote (it does not start with \"" + kDropinMark +
                      "\"): remove it by hand if it is gpu-run's (gpu-run-ctl leaves it as it is)");
  const Toml doc = parse_toml_config(*text, path);
  const int version =
      doc.contains("version") && doc.at("version").is_integer() && doc.at("version").as_integer() == 3 ? 3 : 2;
  const Toml* runtimes = find_table(doc, runtimes_keys(cri_paths(version)));
  if (runtimes && runtimes->contains(handler) && runtimes->at(handler).is_table())
    undo.entry_binary = binary_name(runtimes->at(handler));
  undo.kind = UndoEdit::kRemove;
  undo.said = "removed (gpu-run-ctl configure wrote it)";
  return undo;
}

namespace {

constexpr const char* kRestart = "containerd reads its config only at start: run `systemctl restart containerd`";

void run_undo_containerd(const ConfigureContainerdOptions& o) {
  const fs::path config = o.containerd_config;
  const ContainerdSources sources = read_containerd_sources(config, o.handler, o.host_root);
  bool undone = false;
  for (const ContainerdSource& f : sources.files) {
    if (!f.dropin || !f.text) continue;
    const UndoEdit undo = undo_containerd_dropin(f.text, f.path, o.handler);
    apply_undo(f.path, undo, o.dry_run);
    undone = true;
  }
  const std::optional<std::string>& current = sources.files[0].text;
  const std::optional<std::string> backup = read_existing_file(backup_path(config), "backup");
  const UndoEdit undo = undo_containerd_config(current, backup, config.string(), o.handler);
  // With gpu-run's drop-in gone and config.toml without the handler, that is all.
  if (!undone || undo.kind != UndoEdit::kNothing) apply_undo(config, undo, o.dry_run);
  if (o.dry_run || (!undone && undo.kind == UndoEdit::kNothing)) return;
  std::cout << kRestart
            << "; running pods keep "
               "running with their /dev/shm, and their containers are stopped through the runtime they were started "
               "with (gpu-run-runtime: remove the package after they are gone); delete the RuntimeClass `"
            << o.handler << "` once no node has the handler\n";
}

}  // namespace

void run_configure_containerd(const ConfigureContainerdOptions& o) {
  if (o.undo) {
    run_undo_containerd(o);
    return;
  }
  if (o.config && fs::path(*o.config).extension() == ".toml")
    throw usage_error("--config " + o.config->substr(0, 80) +
                      ": --config is gpu-run's config (JSON); give containerd's config.toml as --containerd-config");
  const fs::path runtime =
      gpu_run_binary(o.runtime_path, "gpu-run-runtime", "--runtime-path", fs::path(kFallbackRuntimePath));
  const fs::path config_file = config_path(o.config);
  const std::string missing_config = check_gpu_run_config(config_file);
  const fs::path config = o.containerd_config;
  const ContainerdSources sources = read_containerd_sources(config, o.handler, o.host_root);
  const Chain chain = resolve_chain(containerd_chained_runtime(sources, o.handler, o.chain), config.string(), runtime);
  const fs::path chain_path = chain_file_path(config, o.handler);
  const fs::path entry_binary = chain.next ? chain_path : runtime;
  const ContainerdPlan plan = plan_containerd(sources, entry_binary.string(), o.handler, o.chain);
  const ContainerdEdit& edit = plan.edit;
  const FileEdit& file = edit.file;
  const fs::path target = plan.path;
  const std::optional<std::string>& existing =
      plan.dropin
          ? std::find_if(sources.files.begin(), sources.files.end(), [](const ContainerdSource& f) { return f.dropin; })
                ->text
          : sources.files[0].text;
  const ChainFile chain_file =
      plan_chain_file(chain, chain_path, runtime, "configure containerd",
                      "the runtime handler \"" + o.handler + "\" of " + fs::absolute(config).string(), file.changed);
  const std::string stale = plan.stale.empty() ? ""
                                               : "the CRI section changed since gpu-run's drop-in copied it (" +
                                                     plan.stale + "): the drop-in is written from the current one";

  for (const std::string& w : plan.warnings) std::cerr << "gpu-run-ctl: warning: " << w << "\n";
  if (o.dry_run) {
    report_dry_run(target, file.changed || !existing ? file.text : *existing, file, "TOML");
    if (!stale.empty()) std::cerr << "gpu-run-ctl: " << stale << "\n";
    report_chain_dry_run(chain, chain_file);
    std::cerr << runtime_config_note(config_file, "containerd", "containerd") << missing_config;
    return;
  }
  if (!file.changed && !chain_file.write) {
    std::cout << target.string() << ": already configured ([" << edit.table << "]: " << chain_words(chain)
              << "); nothing changed\n";
    return;
  }
  // The chain file first: the handler never names a file that is not there yet.
  write_chain_file(chain_file);
  if (file.changed && plan.dropin) {
    if (!stale.empty()) std::cout << "note: " << stale << "\n";
    replace_file(target, file.text, std::nullopt, std::nullopt);
    std::cout << "wrote " << target.string() << ": runtime handler " << o.handler << " ([" << edit.table << "], "
              << "BinaryName = " << entry_binary.string() << "); " << config.string() << " is not changed\n";
  } else if (file.changed) {
    const std::optional<fs::path> backup = replace_file_with_backup(target, file.text, existing, file.first);
    std::cout << "wrote " << target.string() << ": runtime handler " << o.handler << " ([" << edit.table << "], "
              << "BinaryName = " << entry_binary.string() << ")\n";
    if (backup) std::cout << "backup of the previous file (what --undo restores): " << backup->string() << "\n";
  }
  report_chain(chain, chain_file);
  for (const auto& n : file.notes) std::cout << "note: " << n << "\n";
  std::cout << kRestart
            << " (running containers "
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
  add_entry_options(*cmd, o->config, o->runtime_path,
                    "gpu-run-runtime to run (default: next to gpu-run-ctl, else /usr/bin/gpu-run-runtime)", o->undo,
                    "Take the handler out again: restore config.toml from its backup, as it was before");
  cmd->add_option("--handler", o->handler, "Name of the runtime handler (the RuntimeClass's handler)")
      ->type_name("NAME")
      ->capture_default_str();
  cmd->add_option("--chain", o->chain,
                  "The handler whose binary gpu-run-runtime runs next (default: containerd's default handler), e.g. "
                  "nvidia where NVIDIA's runtime is a RuntimeClass of its own")
      ->type_name("HANDLER")
      ->excludes(cmd->get_option("--undo"));
  cmd->add_option("--host-root", o->host_root,
                  "Where the host's / is (the host mounted in a container, an image): config.toml's absolute "
                  "imports are read below it")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->footer(
      "Adds [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.gpu-run] (config version 2,\n"
      "containerd 1.x; version 3, containerd 2.x: plugins.\"io.containerd.cri.v1.runtime\"): runtime_type\n"
      "io.containerd.runc.v2, pod_annotations \"gpu-run.*\" and \"io.kubernetes.cri-o.ShmSize\" so the pod's\n"
      "annotations reach the OCI spec, and the default handler's settings and options. gpu-run-runtime\n"
      "then execs what the default handler runs (its options.BinaryName, e.g. NVIDIA's from the GPU\n"
      "Operator), written to <dir of config.toml>/gpu-run-runtime.<handler>, the handler's BinaryName;\n"
      "runc when the default runs containerd's runc. A default that cannot be chained (another shim, a\n"
      "binary that does not exist, gpu-run-runtime itself) is refused and nothing is written. A missing\n"
      "file becomes a version 2 config; a file without a table for the default runtime gets runc's\n"
      "(containerd drops its built-in runc once the file names a runtime). Comments and other settings\n"
      "are kept; the file as it was before gpu-run's handler is saved as <config>.gpu-run.bak and the new\n"
      "one replaces it atomically; --undo restores it byte for byte, and refuses when the file changed\n"
      "otherwise since. Running it again changes nothing. A malformed file, or config version 1, is\n"
      "reported and never overwritten. config.toml's imports are followed as containerd merges them\n"
      "(1.x: a plugin's whole section from the last file; 2.x: key by key); when it imports a directory\n"
      "(NVIDIA's toolkit 1.18: conf.d/*.toml), the handler goes into 99-zz-gpu-run.toml there, read last\n"
      "(1.x: with the whole CRI section), config.toml unchanged; --undo removes it. --chain HANDLER\n"
      "chains that handler instead of the default. containerd reads its config at start: `systemctl restart\n"
      "containerd`. gpu-run-runtime reads $GPU_RUN_CONFIG from containerd's environment, else\n"
      "/etc/gpu-run/config.json (printed, with a systemd drop-in, when --config names another file).");
  cmd->callback([o] { run_configure_containerd(*o); });
}

}  // namespace gpurun
