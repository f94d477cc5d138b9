#pragma once

#include <cstddef>
#include <string>

namespace gpurun {

// "line:column" (1-based) of byte offset `byte` in `text`.
std::string line_column(const std::string& text, std::size_t byte);

// The message for a JSON syntax error in `text` read from `source`, as nlohmann's parse_error
// reports it (`byte`, `what`): "source:line:column: malformed JSON: syntax error ...".
std::string json_syntax_error(const std::string& text, std::size_t byte, const std::string& what,
                              const std::string& source);

}  // namespace gpurun
