#include "yaml.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace gpurun {
namespace {

using nlohmann::ordered_json;

std::string hex_escape(unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", value);
  return buf;
}

bool is_plain_key(const std::string& key) {
  if (key.empty() || !(std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_')) return false;
  for (char c : key) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '_' || c == '.' || c == '/' || c == '-')) return false;
  }
  std::string lower = key;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  // YAML 1.1 reads these as booleans or null even as keys.
  static const char* const special[] = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"};
  for (const char* s : special)
    if (lower == s) return false;
  return true;
}

std::string scalar(const ordered_json& v) {
  if (v.is_string()) return yaml_quote(v.get<std::string>());
  if (v.is_null()) return "null";
  if (v.is_object()) return "{}";
  if (v.is_array()) return "[]";
  return v.dump();  // numbers and booleans are the same in JSON and YAML
}

bool is_leaf(const ordered_json& v) { return !(v.is_object() || v.is_array()) || v.empty(); }

void emit(const ordered_json& v, int indent, std::ostringstream& out);

// An array item: its first line starts with "- " at `indent`, the rest sits at indent + 2.
void emit_item(const ordered_json& item, int indent, std::ostringstream& out) {
  const std::string pad(indent, ' ');
  if (is_leaf(item)) {
    out << pad << "- " << scalar(item) << "\n";
    return;
  }
  std::ostringstream inner;
  emit(item, indent + 2, inner);
  std::string text = inner.str();
  text.replace(0, indent + 2, pad + "- ");
  out << text;
}

void emit(const ordered_json& v, int indent, std::ostringstream& out) {
  const std::string pad(indent, ' ');
  if (is_leaf(v)) {
    out << pad << scalar(v) << "\n";
  } else if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      out << pad << (is_plain_key(key) ? key : yaml_quote(key)) << ":";
      if (is_leaf(value)) {
        out << " " << scalar(value) << "\n";
      } else {
        out << "\n";
        emit(value, indent + 2, out);
      }
    }
  } else {
    for (const auto& item : v) emit_item(item, indent, out);
  }
}

}  // namespace

std::string yaml_quote(const std::string& text) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += hex_escape(c);
        } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
          // C1 control characters (U+0080..U+009F) are not printable YAML.
          out += hex_escape(static_cast<unsigned char>(text[++i]));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string to_yaml(const ordered_json& value) {
  std::ostringstream out;
  emit(value, 0, out);
  return out.str();
}

}  // namespace gpurun
