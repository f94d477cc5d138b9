#include "yaml.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "test_files.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using test::read_text;
using test::TempDir;

TEST(Yaml, QuotesEveryStringSafely) {
  EXPECT_EQ(yaml_quote("yes"), "\"yes\"");
  EXPECT_EQ(yaml_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(yaml_quote("l1\nl2\t"), "\"l1\\nl2\\t\"");
  EXPECT_EQ(yaml_quote(std::string("\x01\x7f", 2)), "\"\\u0001\\u007f\"");
  EXPECT_EQ(yaml_quote("\xc2\x85"), "\"\\u0085\"");
  EXPECT_EQ(yaml_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

TEST(Yaml, WritesBlockStyle) {
  const ordered_json doc = ordered_json::parse(R"({
    "spec": {"containers": [{"name": "main", "args": ["a", 1, true, null]}], "empty": [], "o": {}},
    "yes": "no", "nvidia.com/gpu": "2", "x y": 0.5
  })");
  EXPECT_EQ(to_yaml(doc),
            "spec:\n"
            "  containers:\n"
            "    - name: \"main\"\n"
            "      args:\n"
            "        - \"a\"\n"
            "        - 1\n"
            "        - true\n"
            "        - null\n"
            "  empty: []\n"
            "  o: {}\n"
            "\"yes\": \"no\"\n"
            "nvidia.com/gpu: \"2\"\n"
            "\"x y\": 0.5\n");
}

// Reads the YAML back with a real YAML parser when the machine has one.
TEST(Yaml, ReadsBackAsTheSameValueWithPyYaml) {
  if (std::system("python3 -c 'import yaml' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 with PyYAML not found";
  TempDir dir;
  const ordered_json doc = ordered_json::parse(R"({
    "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "yes"}, {"name": "B", "value": "0755"},
             {"name": "C", "value": "1e3"}, {"name": "D", "value": "a: b # c"}, {"name": "E", "value": "\"q\"\n\\"},
             {"name": "F", "value": "~"}, {"name": "G", "value": "- x"}, {"name": "H", "value": ""}]}],
             "nested": [[1, 2], [{"k": "v"}]], "on": true, "null": null}
  })");
  const fs::path yaml = dir.write("doc.yaml", to_yaml(doc));
  const fs::path out = dir.path() / "doc.json";
  const std::string cmd =
      "python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1])), open(sys.argv[2], \"w\"))' " +
      yaml.string() + " " + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(yaml);
  EXPECT_EQ(json::parse(read_text(out)), json::parse(doc.dump())) << read_text(yaml);
}

}  // namespace
}  // namespace gpurun
