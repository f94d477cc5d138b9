#include "base/json_error.hpp"

namespace gpurun {

std::string line_column(const std::string& text, std::size_t byte) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

std::string json_syntax_error(const std::string& text, std::size_t byte, const std::string& what,
                              const std::string& source) {
  // nlohmann counts bytes from 1 and points just past the offending one.
  std::string why = what;
  auto pos = why.find("syntax error");
  if (pos != std::string::npos) why = why.substr(pos);
  return source + ":" + line_column(text, byte == 0 ? 0 : byte - 1) + ": malformed JSON: " + why;
}

std::string json_parse_error(const std::string& text, const nlohmann::json::exception& e, const std::string& source) {
  if (const auto* syntax = dynamic_cast<const nlohmann::json::parse_error*>(&e))
    return json_syntax_error(text, syntax->byte, syntax->what(), source);
  return source + ": malformed JSON: " + e.what();
}

}  // namespace gpurun
