#include "ctl/configure/configure_containerd.hpp"

#include <tsl/ordered_map.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
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

DefaultRuntime containerd_default_runtime(const std::optional<std::string>& existing, const std::string& source,
                                          const std::string& handler) {
  check_handler_name(handler);
  DefaultRuntime d;
  d.name = "runc";
  d.where = "containerd's runc";
  if (!existing) return d;
  const Toml doc = parse_toml_config(*existing, source);
  if (doc.as_table().empty()) return d;
  const CriPaths p = cri_paths(config_version(doc, source));
  d.name = default_runtime_name(doc, p, source);
  const Toml* runtimes = find_table(doc, runtimes_keys(p));
  const std::string table = p.runtimes + "." + header_key(d.name);
  d.where = "containerd's default runtime \"" + d.name + "\" ([" + table + "])";
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
    throw usage_error(source + ": the default runtime \"" + d.name + "\" has runtime_type \"" + type +
                      "\", not the runc shim (io.containerd.runc.v2) whose options.BinaryName gpu-run-runtime can "
                      "chain; make a runc-shim handler the default, then run again" +
                      kKeep);
  d.binary = binary_name(base);
  if (!d.binary.empty()) d.where = "containerd's default runtime \"" + d.name + "\" (its options.BinaryName)";
  return d;
}

std::vector<NamedRuntime> containerd_runtimes(const std::optional<std::string>& existing, const std::string& source) {
  std::vector<NamedRuntime> out;
  if (!existing) return out;
  const Toml doc = parse_toml_config(*existing, source);
  if (doc.as_table().empty()) return out;
  const Toml* runtimes = find_table(doc, runtimes_keys(cri_paths(config_version(doc, source))));
  if (!runtimes) return out;
  for (const auto& [name, table] : runtimes->as_table())
    out.push_back({name, table.is_table() ? binary_name(table) : std::string()});
  return out;
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
  const CriPaths p = cri_paths(result.version);
  const std::string default_runtime = default_runtime_name(doc, p, source);

  Toml& plugins = ed.table(doc, "", "plugins");
  Toml& cri = ed.table(plugins, "plugins", p.plugin);
  Toml& containerd = ed.table(cri, "plugins." + header_key(p.plugin), "containerd");
  Toml& runtimes = ed.table(containerd, p.containerd, "runtimes");

  // A file's runtimes replace containerd's built-in ones (runc), and the CRI plugin does not
  // load when the default runtime has no table: measured with containerd 1.6.20.
  if (default_runtime != handler && !runtimes.contains(default_runtime)) {
    if (default_runtime != "runc")
      throw usage_error(source + ": " + p.containerd + ".default_runtime_name is \"" + default_runtime + "\" but " +
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
  const std::optional<Toml> base = default_runtime != handler && runtimes.at(default_runtime).is_table()
                                       ? std::optional<Toml>(runtimes.at(default_runtime))
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
  // What the default runtime's containers get, the chained runtime gets here: the handler's
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

  for (auto& n : ed.notes()) result.file.notes.push_back(n);
  result.file.changed = ed.changed() || !existing;
  result.file.text = format_config(doc, source, read.tail);
  return result;
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

namespace {

void run_undo_containerd(const ConfigureContainerdOptions& o) {
  const fs::path config = o.containerd_config;
  const std::optional<std::string> current = read_existing_file(config, "containerd config");
  const std::optional<std::string> backup = read_existing_file(backup_path(config), "backup");
  const UndoEdit undo = undo_containerd_config(current, backup, config.string(), o.handler);
  apply_undo(config, undo, o.dry_run);
  if (o.dry_run || undo.kind == UndoEdit::kNothing) return;
  std::cout << "containerd reads its config only at start: run `systemctl restart containerd`; running pods keep "
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
  const std::optional<std::string> existing = read_existing_file(config, "containerd config");
  const Chain chain =
      resolve_chain(containerd_default_runtime(existing, config.string(), o.handler), config.string(), runtime);
  const fs::path chain_path = chain_file_path(config, o.handler);
  const fs::path entry_binary = chain.next ? chain_path : runtime;
  const ContainerdEdit edit = merge_containerd_config(existing, config.string(), entry_binary.string(), o.handler);
  const FileEdit& file = edit.file;
  const ChainFile chain_file =
      plan_chain_file(chain, chain_path, runtime, "configure containerd",
                      "the runtime handler \"" + o.handler + "\" of " + fs::absolute(config).string(), file.changed);

  if (o.dry_run) {
    report_dry_run(config, file.changed || !existing ? file.text : *existing, file, "TOML");
    report_chain_dry_run(chain, chain_file);
    std::cerr << runtime_config_note(config_file, "containerd", "containerd") << missing_config;
    return;
  }
  if (!file.changed && !chain_file.write) {
    std::cout << config.string() << ": already configured ([" << edit.table << "]: " << chain_words(chain)
              << "); nothing changed\n";
    return;
  }
  // The chain file first: the handler never names a file that is not there yet.
  write_chain_file(chain_file);
  if (file.changed) {
    const std::optional<fs::path> backup = replace_file_with_backup(config, file.text, existing, file.first);
    std::cout << "wrote " << config.string() << ": runtime handler " << o.handler << " ([" << edit.table << "], "
              << "BinaryName = " << entry_binary.string() << ")\n";
    if (backup) std::cout << "backup of the previous file (what --undo restores): " << backup->string() << "\n";
  }
  report_chain(chain, chain_file);
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
  add_entry_options(*cmd, o->config, o->runtime_path,
                    "gpu-run-runtime to run (default: next to gpu-run-ctl, else /usr/bin/gpu-run-runtime)", o->undo,
                    "Take the handler out again: restore config.toml from its backup, as it was before");
  cmd->add_option("--handler", o->handler, "Name of the runtime handler (the RuntimeClass's handler)")
      ->type_name("NAME")
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
      "reported and never overwritten. containerd reads its config at start: `systemctl restart\n"
      "containerd`. gpu-run-runtime reads $GPU_RUN_CONFIG from containerd's environment, else\n"
      "/etc/gpu-run/config.json (printed, with a systemd drop-in, when --config names another file).");
  cmd->callback([o] { run_configure_containerd(*o); });
}

}  // namespace gpurun
