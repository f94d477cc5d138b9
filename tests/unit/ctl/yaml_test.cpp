#include "ctl/k8s/yaml.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using test::read_text;
using test::TempDir;

// Strings that look like other types, need escapes or are not ASCII; keys that need quotes;
// empty and nested collections.
const char* const kTricky = R"({
  "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "yes"}, {"name": "B", "value": "0755"},
           {"name": "C", "value": "1e3"}, {"name": "D", "value": "a: b # c"}, {"name": "E", "value": "\"q\"\n\\"},
           {"name": "F", "value": "~"}, {"name": "G", "value": "- x"}, {"name": "H", "value": ""},
           {"name": "I", "value": "null"}, {"name": "J", "value": "True"}, {"name": "K", "value": "0x1F"},
           {"name": "L", "value": " padded "}, {"name": "M", "value": "l1\nl2\r\n\tl3"}]}],
           "nested": [[1, 2], [{"k": "v"}], [], {}, [[]]], "on": true, "null": null},
  "unicode": ["caf\u00e9", "\u65e5\u672c", "\ud83d\ude00", "\u2028\u2029", "\ufeffbom", "\u00a0nbsp"],
  "control": ["\u0000", "\u0001\u001f", "\u007f", "\u0085", "\u009f", "\b\f"],
  "numbers": [0, -1, 0.5, 1.25e-7, 18446744073709551615, -9223372036854775808],
  "keys": {"yes": 1, "No": 2, "ON": 3, "y": 4, "Null": 5, "~": 6, "": 7, "x y": 8, "1e3": 9, "0755": 10,
           "-x": 11, "a: b": 12, "#c": 13, "k\nl": 14, "true": 15, "nvidia.com/gpu": 16, "_x": 17, "caf\u00e9": 18},
  "empty": {"map": {}, "list": [], "string": ""}
})";

ordered_json from_yaml(const YAML::Node& node, bool key = false);

// A scalar as a reader resolves it: quoted ("!" tag) is a string; plain is null, a boolean
// (YAML 1.1's words, yaml-cpp's table) or a number. to_yaml writes no plain string value.
ordered_json scalar_value(const YAML::Node& node, bool key) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;
  bool as_bool = false;
  if (YAML::convert<bool>::decode(node, as_bool)) return as_bool;
  const ordered_json number = ordered_json::parse(text, nullptr, false);
  if (!number.is_discarded() && number.is_number()) return number;
  if (!key) ADD_FAILURE() << "a plain string value: " << text;
  return text;
}

// The value YAML::Load read, as JSON, keys in the document's order.
ordered_json from_yaml(const YAML::Node& node, bool key) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      ordered_json out = ordered_json::object();
      for (const auto& entry : node) {
        const ordered_json name = from_yaml(entry.first, true);
        EXPECT_TRUE(name.is_string()) << "a key read as " << name.dump();
        out[name.is_string() ? name.get<std::string>() : name.dump()] = from_yaml(entry.second);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      ordered_json out = ordered_json::array();
      for (const auto& item : node) out.push_back(from_yaml(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalar_value(node, key);
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Undefined:
      break;
  }
  ADD_FAILURE() << "an undefined node";
  return nullptr;
}

TEST(Yaml, WritesBlockStyle) {
  const ordered_json doc = ordered_json::parse(R"({
    "spec": {"containers": [{"name": "main", "args": ["a", 1, true, null]}], "empty": [], "o": {}},
    "yes": "no", "nvidia.com/gpu": "2", "x y": 0.5, "nested": [[1], [{"k": "v", "l": "w"}]]
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
            "\"x y\": 0.5\n"
            "nested:\n"
            "  -\n"
            "    - 1\n"
            "  -\n"
            "    - k: \"v\"\n"
            "      l: \"w\"\n");
}

TEST(Yaml, EscapesWhatIsNotPrintableAscii) {
  const ordered_json doc = {{"s", "a\"b\\c\nd\te\x01\x7f caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80"}};
  EXPECT_EQ(to_yaml(doc), "s: \"a\\\"b\\\\c\\nd\\te\\x01\\x7f caf\\xe9 \\u2028 \\U0001f600\"\n");
  EXPECT_EQ(to_yaml("yes"), "\"yes\"\n");
  EXPECT_EQ(to_yaml(ordered_json::object()), "{}\n");
}

TEST(Yaml, ReadsBackAsTheSameValue) {
  const ordered_json doc = ordered_json::parse(kTricky);
  const std::string yaml = to_yaml(doc);
  EXPECT_EQ(from_yaml(YAML::Load(yaml)), doc) << yaml;
  for (const char* text : {"\"\"", "\"yes\"", "null", "[]", "{}", "[[[]]]", "-0.25"}) {
    const ordered_json value = ordered_json::parse(text);
    EXPECT_EQ(from_yaml(YAML::Load(to_yaml(value))), value) << to_yaml(value);
  }
}

// YAML 1.1 as PyYAML reads it, when the machine has it: its resolver reads keys and values
// yaml-cpp leaves untyped.
TEST(Yaml, ReadsBackAsTheSameValueWithPyYaml) {
  SKIP_UNLESS(std::system("python3 -c 'import yaml' >/dev/null 2>&1") == 0, "python3 with PyYAML not found");
  TempDir dir;
  const ordered_json doc = ordered_json::parse(kTricky);
  const fs::path yaml = dir.write("doc.yaml", to_yaml(doc));
  const fs::path out = dir.path() / "doc.json";
  const std::string cmd =
      "python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1], encoding=\"utf-8\")), "
      "open(sys.argv[2], \"w\"))' " +
      yaml.string() + " " + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(yaml);
  EXPECT_EQ(json::parse(read_text(out)), json::parse(doc.dump())) << read_text(yaml);
}

TEST(YamlDocuments, SplitAtEachDocumentStart) {
  const std::string stream = "# head\na: 1\n---\nb: 2\n--- # c\n---x: 3\n...\n---\n";
  const std::vector<YamlDocumentText> docs = split_yaml_documents(stream);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].text, "# head\na: 1\n");
  EXPECT_EQ(docs[1].text, "---\nb: 2\n");
  EXPECT_EQ(docs[2].text, "--- # c\n---x: 3\n...\n") << "---x is content, not a document start";
  EXPECT_EQ(docs[2].line, 5u);
  EXPECT_EQ(docs[3].text, "---\n");
  std::string joined;
  for (const auto& d : docs) joined += d.text;
  EXPECT_EQ(joined, stream);
  EXPECT_TRUE(split_yaml_documents("").empty());
}

TEST(YamlDocuments, ValuesAsYamlCppReadsThem) {
  const ordered_json v = yaml_document_value(
      "q: \"2\"\nn: 2\nneg: -3\nf: 0.5\nb: yes\no: 0755\nh: 0x1F\nz: ~\ne:\ns: !!str 12\nt: !!int \"7\"\n"
      "l: |\n  x\n  y\nw: 12abc\ninf: .inf\nk: [a, {b: c}]\n1: one\n",
      "t.yaml");
  EXPECT_EQ(v, ordered_json::parse(R"({"q": "2", "n": 2, "neg": -3, "f": 0.5, "b": true, "o": 493, "h": 31, "z": null,
    "e": null, "s": "12", "t": 7, "l": "x\ny\n", "w": "12abc", "inf": ".inf", "k": ["a", {"b": "c"}], "1": "one"})"));
  EXPECT_EQ(std::vector<std::string>(1, v.begin().key()), std::vector<std::string>{"q"}) << "keys in order";
  EXPECT_TRUE(yaml_document_value("# nothing\n", "t.yaml").is_null());
  const Error e = expect_error([] { yaml_document_value("a: 1\nb: [1\n", "t.yaml", 10); });
  EXPECT_CONTAINS(e.what(), "t.yaml:1");
  EXPECT_CONTAINS(e.what(), "not YAML");
  EXPECT_CONTAINS(expect_error([] { yaml_document_value("? [a]\n: 1\n", "t.yaml"); }).what(), "not a string");
}

TEST(YamlDocuments, RewriteKeepsWhatTheEditLeft) {
  const std::string doc =
      "--- # the pod\n# Source: x.yaml\nkind: Pod   # inline, lost when rewritten\nmetadata: {name: p, labels: {a: "
      "\"1\"}}\nspec:\n  # inside, lost\n  containers:\n  - name: c\n    args: ['--lr', \"0.1\", 3, yes]\n"
      "    resources:\n      limits: {memory: 32Gi}\n    script: |\n      line one\n        two\n"
      "# trailing comment\n\n";
  ordered_json v = yaml_document_value(doc, "d");
  // Unchanged: the same value back, the comments around the content, flow and quoting.
  const std::string same = rewrite_yaml_document(doc, v);
  EXPECT_EQ(yaml_document_value(same, "d"), v) << same;
  EXPECT_EQ(same.rfind("--- # the pod\n# Source: x.yaml\nkind: Pod\n", 0), 0u) << same;
  EXPECT_CONTAINS(same, "metadata: {name: p, labels: {a: \"1\"}}\n");
  EXPECT_CONTAINS(same, "args: [\"--lr\", \"0.1\", 3, yes]");
  EXPECT_CONTAINS(same, "script: \"line one\\n  two\\n\"");
  EXPECT_EQ(same.substr(same.size() - 20), "# trailing comment\n\n");
  EXPECT_EQ(same.find("inline"), std::string::npos);
  // Edited: changed scalars and added members new, strings quoted unless plain is safe.
  v["spec"]["containers"][0]["resources"]["limits"]["memory"] = "34042Mi";
  v["spec"]["containers"][0]["env"] = {{{"name", "A"}, {"value", "2"}},
                                       {{"name", "B"}, {"value", "yes"}},
                                       {{"name", "C"}, {"value", "/dev/shm"}},
                                       {{"name", "D"}, {"value", "imagenet"}}};
  v["spec"]["volumes"] = {{{"name", "gpu-run-shm"}, {"emptyDir", {{"medium", "Memory"}}}}};
  const std::string edited = rewrite_yaml_document(doc, v);
  EXPECT_EQ(yaml_document_value(edited, "d"), v) << edited;
  EXPECT_CONTAINS(edited, "limits: {memory: \"34042Mi\"}");
  EXPECT_CONTAINS(edited, "value: \"2\"");
  EXPECT_CONTAINS(edited, "value: \"yes\"");
  EXPECT_CONTAINS(edited, "value: /dev/shm");
  EXPECT_CONTAINS(edited, "value: imagenet");
  EXPECT_CONTAINS(edited, "metadata: {name: p, labels: {a: \"1\"}}\n") << "the untouched part as it was";
  // `--- {..}`: content on the marker's line.
  EXPECT_EQ(rewrite_yaml_document("--- {a: 1}\n", ordered_json{{"a", 2}}), "---\n{a: 2}\n");
}

// What rewrite_yaml_document writes, as PyYAML (YAML 1.1) reads it, when the machine has it.
TEST(YamlDocuments, RewriteReadsBackWithPyYaml) {
  SKIP_UNLESS(std::system("python3 -c 'import yaml' >/dev/null 2>&1") == 0, "python3 with PyYAML not found");
  const std::string doc = "a: {b: \"0755\", c: 'yes', d: no}\ne: [\"1e3\", x]\nf: |\n  l1\n\n  l2\n";
  ordered_json v = yaml_document_value(doc, "d");
  v["g"] = ordered_json::parse(kTricky);
  TempDir dir;
  const fs::path yaml = dir.write("doc.yaml", rewrite_yaml_document(doc, v));
  const fs::path out = dir.path() / "doc.json";
  const std::string cmd =
      "python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1], encoding=\"utf-8\")), "
      "open(sys.argv[2], \"w\"))' " +
      yaml.string() + " " + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(yaml);
  EXPECT_EQ(json::parse(read_text(out)), json::parse(v.dump())) << read_text(yaml);
}

}  // namespace
}  // namespace gpurun
