#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpurun {

// Writes a JSON value as block-style YAML (yaml-cpp's emitter, keys in the value's order) that
// reads back as the same value (YAML 1.1 and 1.2). Every string value is double-quoted, so
// "yes", "0755" or "1e3" stay strings; keys are plain only when they cannot be read as anything
// else; characters outside printable ASCII are escaped.
std::string to_yaml(const nlohmann::ordered_json& value);

// One document of a YAML stream: its text, from its `---` line (when it has one) up to the next
// document's, and the stream's line it starts at (1-based).
struct YamlDocumentText {
  std::string text;
  std::size_t line = 1;
};

// `stream` cut before each line that starts a document (`---` at the start of a line: YAML lets
// no content begin a line with it). The parts, joined, are `stream`.
std::vector<YamlDocumentText> split_yaml_documents(const std::string& stream);

// The value of one YAML document as JSON, keys in the document's order (null when it has none).
// Scalars as yaml-cpp reads them: a quoted or block one is a string; a plain one is null, a
// YAML 1.1 boolean (yes, on, ...), an integer (0x hex, a leading 0 octal), a finite number, or
// else a string. Throws Error naming `where` and the line (`first_line` is the document's) on
// text that is not YAML or a key that is not a scalar.
nlohmann::ordered_json yaml_document_value(const std::string& text, const std::string& where,
                                           std::size_t first_line = 1);

// The document `text` written anew to hold `value`, an edit of yaml_document_value(text). What
// the edit left equal keeps its YAML form: key order, flow or block style, plain or quoted
// scalars (quoted ones double-quoted), explicit tags. The comment lines before the document's
// first content and after its last are kept; comments in between, anchors (aliases are written
// out), the original indentation and block scalars' style (written double-quoted) are not.
// New strings are plain only when no YAML reader can take them for anything else.
std::string rewrite_yaml_document(const std::string& text, const nlohmann::ordered_json& value);

}  // namespace gpurun
