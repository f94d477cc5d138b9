#include "yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include "error.hpp"

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

void emit(YAML::Emitter& out, const ordered_json& value) {
  switch (value.type()) {
    case ordered_json::value_t::object:
      // An empty map or sequence in flow style ("{}", "[]") stays on its key's line.
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key;
        if (!is_plain_key(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, item);
      }
      out << YAML::EndMap;
      break;
    case ordered_json::value_t::array:
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const ordered_json& item : value) emit(out, item);
      out << YAML::EndSeq;
      break;
    case ordered_json::value_t::string:
      out << YAML::DoubleQuoted << value.get_ref<const std::string&>();
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

}  // namespace gpurun
