#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace gpurun {

// "line:column" (1-based) of byte offset `byte` in `text`.
std::string line_column(const std::string& text, std::size_t byte);

// The message for a JSON syntax error in `text` read from `source`, as nlohmann's parse_error
// reports it (`byte`, `what`): "source:line:column: malformed JSON: syntax error ...".
std::string json_syntax_error(const std::string& text, std::size_t byte, const std::string& what,
                              const std::string& source);

// The message for whatever nlohmann threw parsing `text` from `source` (json or ordered_json,
// which share it): a syntax error with its line and column (json_syntax_error), anything else (a
// number such as 1e999 out of range) as "source: malformed JSON: <nlohmann's words>". The one
// catch of a JSON document a person wrote.
std::string json_parse_error(const std::string& text, const nlohmann::json::exception& e, const std::string& source);

}  // namespace gpurun
