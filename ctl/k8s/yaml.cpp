#include "ctl/k8s/yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "base/error.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

// Plain only when every YAML reader takes the key for the same string: it starts with a letter
// or '_', holds only letters, digits and _ . / - (as Kubernetes' label and annotation keys do)
// and is neither null nor a YAML 1.1 boolean (yaml-cpp's table: y, yes, on, true, ...).
bool is_plain_key(const std::string& key) {
  if (key.empty() || !(std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_')) return false;
  for (char c : key) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '_' || c == '.' || c == '/' || c == '-')) return false;
  }
  bool as_bool = false;
  return !YAML::IsNullString(key) && !YAML::convert<bool>::decode(YAML::Node(key), as_bool);
}

bool is_plain_value(const std::string& s);

// How emit writes strings: always double-quoted (the objects gpu-run-ctl prints), or plain where a
// person reads it so and every YAML reader takes it for the same string (what `k8s -f` adds).
enum class Strings { quoted, plain_when_safe };

void emit(YAML::Emitter& out, const ordered_json& value, Strings strings = Strings::quoted) {
  switch (value.type()) {
    case ordered_json::value_t::object:
      // An empty map or sequence in flow style ("{}", "[]") stays on its key's line.
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key;
        if (!is_plain_key(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, item, strings);
      }
      out << YAML::EndMap;
      break;
    case ordered_json::value_t::array:
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const ordered_json& item : value) emit(out, item, strings);
      out << YAML::EndSeq;
      break;
    case ordered_json::value_t::string:
      if (strings == Strings::quoted || !is_plain_value(value.get_ref<const std::string&>())) out << YAML::DoubleQuoted;
      out << value.get_ref<const std::string&>();
      break;
    case ordered_json::value_t::boolean:
      out << value.get<bool>();
      break;
    case ordered_json::value_t::null:
      out << YAML::Null;
      break;
    default:
      // A number as JSON writes it (the shortest text that reads back the same), plain.
      out << value.dump();
  }
}

// A string value a person reads plain and every YAML reader takes for the same string: the
// key rule, or a path ("/dev/shm").
bool is_plain_value(const std::string& s) {
  return is_plain_key(s) || (s.size() > 1 && s[0] == '/' && is_plain_key("x" + s));
}

constexpr std::string_view kYamlTagPrefix = "tag:yaml.org,2002:";

// The lines of `text`, each with its line break.
std::vector<std::string_view> lines_of(const std::string& text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    lines.push_back(std::string_view(text).substr(start, end - start));
    start = end;
  }
  return lines;
}

bool is_document_start(std::string_view line) {
  return line.substr(0, 3) == "---" &&
         (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r' || line[3] == '\n');
}

bool is_blank_or_comment(std::string_view line) {
  const std::size_t at = line.find_first_not_of(" \t\r\n");
  return at == std::string_view::npos || line[at] == '#';
}

// A scalar as yaml-cpp reads it (yaml_document_value's rules).
ordered_json scalar_value(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  const std::string& tag = node.Tag();
  std::string as = "?";  // plain: resolved from the text
  if (tag == "!") return text;
  if (tag.rfind(kYamlTagPrefix, 0) == 0) as = tag.substr(kYamlTagPrefix.size());
  if (tag != "?" && as == "?") return text;  // another tag: its text
  if (as == "str") return text;
  if ((as == "?" || as == "null") && YAML::IsNullString(text)) return nullptr;
  if (bool b = false; (as == "?" || as == "bool") && YAML::convert<bool>::decode(node, b)) return b;
  if (as == "?" || as == "int") {
    if (long long i = 0; YAML::convert<long long>::decode(node, i)) return i;
    if (unsigned long long u = 0; YAML::convert<unsigned long long>::decode(node, u)) return u;
  }
  if (double d = 0;
      (as == "?" || as == "float" || as == "int") && YAML::convert<double>::decode(node, d) && std::isfinite(d))
    return d;
  return text;
}

ordered_json node_value(const YAML::Node& node, const std::string& where, std::size_t first_line) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      ordered_json out = ordered_json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar() && !entry.first.IsNull())
          throw usage_error(where + ":" + std::to_string(first_line + entry.first.Mark().line) +
                            ": a key that is not a string (JSON, and so Kubernetes, has only string keys)");
        out[entry.first.Scalar()] = node_value(entry.second, where, first_line);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      ordered_json out = ordered_json::array();
      for (const auto& item : node) out.push_back(node_value(item, where, first_line));
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalar_value(node);
    default:
      return nullptr;
  }
}

void emit_tag(YAML::Emitter& out, const std::string& tag) {
  if (tag.empty() || tag == "?" || tag == "!") return;
  if (tag.rfind(kYamlTagPrefix, 0) == 0)
    out << YAML::SecondaryTag(tag.substr(kYamlTagPrefix.size()));
  else if (tag[0] == '!')
    out << YAML::LocalTag(tag.substr(1));
  else
    out << YAML::VerbatimTag(tag);
}

// A node as it was read: flow or block, plain or (double-)quoted, its tag.
void emit_node(YAML::Emitter& out, const YAML::Node& node) {
  emit_tag(out, node.Tag());
  switch (node.Type()) {
    case YAML::NodeType::Map:
      if (node.size() == 0 || node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& entry : node) {
        out << YAML::Key;
        emit_node(out, entry.first);
        out << YAML::Value;
        emit_node(out, entry.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      if (node.size() == 0 || node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : node) emit_node(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      // Plain stays plain (it reads as it did); quoted and block scalars are strings, written
      // double-quoted (yaml-cpp's literal style loses trailing and leading blanks).
      if (node.Tag() != "!")
        out << node.Scalar();
      else
        out << YAML::DoubleQuoted << node.Scalar();
      break;
    default:
      out << YAML::Null;
  }
}

// `after` written over `node` (whose value is `before`): equal parts as they were read, changed
// scalars and added members new.
void emit_edit(YAML::Emitter& out, const YAML::Node& node, const ordered_json& before, const ordered_json& after) {
  if (before == after) return emit_node(out, node);
  if (node.IsMap() && before.is_object() && after.is_object()) {
    emit_tag(out, node.Tag());
    if (after.empty() || node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
    out << YAML::BeginMap;
    for (const auto& [key, value] : after.items()) {
      std::optional<std::pair<YAML::Node, YAML::Node>> was;
      for (const auto& entry : node)
        if (entry.first.Scalar() == key) was.emplace(entry.first, entry.second);
      out << YAML::Key;
      if (was) {
        emit_node(out, was->first);
        out << YAML::Value;
        emit_edit(out, was->second, before[key], value);
      } else {
        if (!is_plain_key(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, value, Strings::plain_when_safe);
      }
    }
    out << YAML::EndMap;
  } else if (node.IsSequence() && before.is_array() && after.is_array()) {
    emit_tag(out, node.Tag());
    if (after.empty() || node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (std::size_t i = 0; i < after.size(); ++i)
      if (i < node.size() && i < before.size())
        emit_edit(out, node[i], before[i], after[i]);
      else
        emit(out, after[i], Strings::plain_when_safe);
    out << YAML::EndSeq;
  } else {
    emit(out, after, Strings::plain_when_safe);
  }
}

}  // namespace

std::string to_yaml(const ordered_json& value) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  // Escaped, not raw: DEL and U+2028 are not printable in YAML 1.1, and yaml-cpp writes them raw.
  out.SetOutputCharset(YAML::EscapeNonAscii);
  emit(out, value);
  if (!out.good()) throw Error("write YAML: " + out.GetLastError());
  return std::string(out.c_str(), out.size()) + "\n";
}

std::vector<YamlDocumentText> split_yaml_documents(const std::string& stream) {
  std::vector<YamlDocumentText> docs;
  std::size_t line = 1;
  for (const std::string_view l : lines_of(stream)) {
    if (docs.empty() || is_document_start(l)) docs.push_back({"", line});
    docs.back().text += l;
    ++line;
  }
  return docs;
}

ordered_json yaml_document_value(const std::string& text, const std::string& where, std::size_t first_line) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw usage_error(where + ":" + std::to_string(first_line + std::max(e.mark.line, 0)) + ": not YAML: " + e.msg);
  }
  return node_value(node, where, first_line);
}

std::string rewrite_yaml_document(const std::string& text, const ordered_json& value) {
  const YAML::Node node = YAML::Load(text);
  const ordered_json before = node_value(node, "", 1);
  const std::vector<std::string_view> lines = lines_of(text);
  std::size_t first = 0;
  std::string head;
  if (!lines.empty() && is_document_start(lines[0])) {
    // `--- # comment` is kept; `--- {a: 1}` or `--- !tag` starts the content on its line.
    if (is_blank_or_comment(lines[0].substr(3))) {
      head += lines[0];
      ++first;
    } else {
      head += "---\n";
      first = lines.size();
    }
  }
  for (; first < lines.size() && is_blank_or_comment(lines[first]); ++first) head += lines[first];
  // After the content: blank lines, comments at the start of a line (one further in could be in a
  // block scalar), the document end marker.
  std::size_t last = lines.size();
  const auto after_content = [](std::string_view l) {
    return l.find_first_not_of(" \t\r\n") == std::string_view::npos || l[0] == '#' || l.substr(0, 3) == "...";
  };
  while (last > first && after_content(lines[last - 1])) --last;
  std::string tail;
  for (std::size_t i = last; i < lines.size(); ++i) tail += lines[i];
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out.SetOutputCharset(YAML::EscapeNonAscii);
  emit_edit(out, node, before, value);
  if (!out.good()) throw Error("write YAML: " + out.GetLastError());
  return head + std::string(out.c_str(), out.size()) + "\n" + tail;
}

}  // namespace gpurun
