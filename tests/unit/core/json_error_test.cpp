#include "base/json_error.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpurun {
namespace {

TEST(JsonErrorTest, LineColumnCountsFromOne) {
  EXPECT_EQ(line_column("", 0), "1:1");
  EXPECT_EQ(line_column("ab\ncd", 1), "1:2");
  EXPECT_EQ(line_column("ab\ncd", 3), "2:1");
  EXPECT_EQ(line_column("ab\ncd", 4), "2:2");
  EXPECT_EQ(line_column("ab", 99), "1:3");  // past the end: the end
}

TEST(JsonErrorTest, SyntaxErrorNamesSourceLineAndColumn) {
  const std::string text = "{\n  \"a\": 1,\n}";
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    FAIL() << "parsed: " << doc;
  } catch (const nlohmann::json::parse_error& e) {
    const std::string m = json_syntax_error(text, e.byte, e.what(), "f.json");
    EXPECT_EQ(m.rfind("f.json:3:1: malformed JSON: syntax error", 0), 0u) << m;
  }
}

// One catch for either document type: a syntax error with its place, a number out of range in
// nlohmann's words.
TEST(JsonErrorTest, AnyParseFailureIsOneLine) {
  auto message_of = [](const std::string& text) -> std::string {
    try {
      const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text);
      return "parsed: " + doc.dump();
    } catch (const nlohmann::ordered_json::exception& e) {
      return json_parse_error(text, e, "f.json");
    }
  };
  EXPECT_EQ(message_of("{\n  \"a\": 1,\n}").rfind("f.json:3:1: malformed JSON: syntax error", 0), 0u);
  const std::string huge = message_of("{\"a\": 1e999}");
  EXPECT_EQ(huge.rfind("f.json: malformed JSON: ", 0), 0u) << huge;
  EXPECT_NE(huge.find("1e999"), std::string::npos) << huge;
}

}  // namespace
}  // namespace gpurun
