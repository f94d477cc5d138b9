#include "profiles/profile.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

std::string parse_error(const std::string& text, const std::string& source = "team/x.json") {
  return error_of([&] { parse_profile_document(text, source); });
}

// Every key a profile must have once merged, spelled as a user would.
const char* const kComplete = R"({
  "name": "imagenet",
  "description": "test",
  "fields": [
    {"name": "image", "shape": [3, 224, 224], "dtype": "float32"},
    {"name": "label", "shape": [], "dtype": "int64"}
  ],
  "batch_size": 64,
  "workers_per_gpu": "auto",
  "prefetch_factor": 2,
  "pin_memory": true,
  "headroom": 1.25,
  "nccl_reserve": "1g",
  "min_shm": "256m",
  "max_shm": "256g"
})";

TEST(DtypeSize, PyTorchNames) {
  EXPECT_EQ(dtype_size("float64"), 8u);
  EXPECT_EQ(dtype_size("float32"), 4u);
  EXPECT_EQ(dtype_size("float16"), 2u);
  EXPECT_EQ(dtype_size("bfloat16"), 2u);
  EXPECT_EQ(dtype_size("int64"), 8u);
  EXPECT_EQ(dtype_size("int32"), 4u);
  EXPECT_EQ(dtype_size("int16"), 2u);
  EXPECT_EQ(dtype_size("int8"), 1u);
  EXPECT_EQ(dtype_size("uint8"), 1u);
  EXPECT_EQ(dtype_size("bool"), 1u);
  EXPECT_THROW(dtype_size("Float32"), Error);
  EXPECT_THROW(dtype_size("torch."), Error);
  EXPECT_THROW(dtype_size("float128"), Error);
}

TEST(DtypeSize, PyTorchsOtherNamesAsInTorchFloat) {
  // torch.float is torch.float32, torch.long torch.int64, ...; str(tensor.dtype) is "torch.float32".
  EXPECT_EQ(dtype_size("float"), 4u);
  EXPECT_EQ(dtype_size("double"), 8u);
  EXPECT_EQ(dtype_size("half"), 2u);
  EXPECT_EQ(dtype_size("long"), 8u);
  EXPECT_EQ(dtype_size("int"), 4u);
  EXPECT_EQ(dtype_size("short"), 2u);
  EXPECT_EQ(dtype_size("torch.float"), 4u);
  EXPECT_EQ(dtype_size("torch.uint8"), 1u);
  EXPECT_EQ(canonical_dtype("torch.long"), "int64");
  EXPECT_EQ(canonical_dtype("half"), "float16");
  EXPECT_EQ(canonical_dtype("bfloat16"), "bfloat16");
  EXPECT_EQ(canonical_dtype("cheese"), std::nullopt);
  // In a profile file too: the same parser.
  const auto doc = R"({"fields": [{"name": "x", "shape": [2], "dtype": "float"},
                                  {"name": "y", "shape": [], "dtype": "torch.long"}]})";
  EXPECT_NO_THROW(parse_profile_document(doc, "p.json"));
  EXPECT_THROW(parse_profile_document(R"({"fields": [{"name": "x", "shape": [2], "dtype": "quad"}]})", "p.json"),
               Error);
}

TEST(ProfileDocument, CompleteDocumentParses) {
  json doc = parse_profile_document(kComplete, "imagenet.json");
  EXPECT_EQ(doc["batch_size"], 64);
  Profile p = profile_from_document(doc, "imagenet.json");
  EXPECT_EQ(p.name, "imagenet");
  ASSERT_EQ(p.fields.size(), 2u);
  EXPECT_EQ(p.fields[0].name, "image");
  EXPECT_EQ(p.fields[0].shape, (std::vector<std::uint64_t>{3, 224, 224}));
  EXPECT_EQ(p.fields[0].dtype, "float32");
  EXPECT_TRUE(p.fields[1].shape.empty());
  EXPECT_FALSE(p.sample_bytes.has_value());
  EXPECT_EQ(p.batch_size, 64u);
  EXPECT_FALSE(p.workers_per_gpu.has_value());  // "auto"
  EXPECT_EQ(p.prefetch_factor, 2u);
  EXPECT_TRUE(p.pin_memory);
  EXPECT_DOUBLE_EQ(p.headroom, 1.25);
  EXPECT_EQ(p.nccl_reserve, 1073741824u);
  EXPECT_EQ(p.min_shm, 268435456u);
  EXPECT_EQ(p.max_shm, 274877906944u);  // 256 * 1024^3
  EXPECT_FALSE(p.calibration.has_value());
  // 3*224*224 float32 = 150528 * 4 = 602112 bytes, + one int64 label = 602120.
  EXPECT_EQ(sample_bytes(p), 602120u);
}

TEST(ProfileDocument, OnlyTheKeysTheFileSets) {
  json doc = parse_profile_document(R"({"extends": "default", "batch_size": 8})", "a.json");
  EXPECT_EQ(doc.size(), 2u);
}

TEST(ProfileDocument, UnknownKeyNamesFileAndKey) {
  std::string m = parse_error(R"({"batch_size": 64, "batchsize": 64})");
  EXPECT_EQ(m.rfind("team/x.json: key 'batchsize': unknown key", 0), 0u) << m;
}

TEST(ProfileDocument, WrongTypesNameTheKey) {
  struct Case {
    const char* text;
    const char* key;
  } cases[] = {
      {R"({"batch_size": "64"})", "'batch_size'"},
      {R"({"batch_size": 0})", "'batch_size'"},
      {R"({"batch_size": -1})", "'batch_size'"},
      {R"({"batch_size": 1.5})", "'batch_size'"},
      {R"({"batch_size": 2000000})", "'batch_size'"},
      {R"({"prefetch_factor": 0})", "'prefetch_factor'"},
      {R"({"workers_per_gpu": "many"})", "'workers_per_gpu'"},
      {R"({"workers_per_gpu": -1})", "'workers_per_gpu'"},
      {R"({"workers_per_gpu": 1025})", "'workers_per_gpu'"},
      {R"({"pin_memory": 1})", "'pin_memory'"},
      {R"({"pin_memory": "true"})", "'pin_memory'"},
      {R"({"headroom": 0.5})", "'headroom'"},
      {R"({"headroom": 17})", "'headroom'"},
      {R"({"headroom": "1.25"})", "'headroom'"},
      {R"({"nccl_reserve": true})", "'nccl_reserve'"},
      {R"({"min_shm": "2x"})", "'min_shm'"},
      {R"({"max_shm": -5})", "'max_shm'"},
      {R"({"description": 3})", "'description'"},
      {R"({"name": "Bad Name"})", "'name'"},
      {R"({"extends": "../etc/passwd"})", "'extends'"},
      {R"({"schema": 2})", "'schema'"},
      {R"({"sample_bytes": 0})", "'sample_bytes'"},
      {R"({"sample_bytes": "0"})", "'sample_bytes'"},
      {R"({"sample_bytes": [1]})", "'sample_bytes'"},
      {R"({"fields": []})", "'fields'"},
      {R"({"fields": {"name": "x"}})", "'fields'"},
      {R"({"calibration": 5})", "'calibration'"},
      {R"({"nccl": "shm"})", "'nccl'"},
      {R"({"nccl": {"transport": "nvlink"}})", "'nccl.transport'"},
      {R"({"nccl": {"channels": 0}})", "'nccl.channels'"},
      {R"({"nccl": {"channels": 65}})", "'nccl.channels'"},
      {R"({"nccl": {"buffsize": "4x"}})", "'nccl.buffsize'"},
      {R"({"nccl": {"measured": true}})", "'nccl.measured'"},
      {R"({"nccl": {"measured_ranks": 1}})", "'nccl.measured_ranks'"},
      {R"({"nccl": {"measured_ranks": "2"}})", "'nccl.measured_ranks'"},
      {R"({"loaders": []})", "'loaders'"},
      {R"({"loaders": [5]})", "'loaders[0]'"},
      {R"({"loaders": [{"name": ""}]})", "'loaders[0].name'"},
      {R"({"loaders": [{"name": "v", "batch_size": 0}]})", "'loaders[0].batch_size'"},
      {R"({"loaders": [{"name": "v", "workers": "some"}]})", "'loaders[0].workers'"},
      {R"({"loaders": [{"name": "v", "persistent_workers": 1}]})", "'loaders[0].persistent_workers'"},
      {R"({"loaders": [{"name": "v", "fields": []}]})", "'loaders[0].fields'"},
  };
  for (const auto& c : cases) {
    std::string m = parse_error(c.text);
    EXPECT_EQ(m.rfind("team/x.json: key ", 0), 0u) << c.text << " -> " << m;
    EXPECT_CONTAINS(m, c.key);
    EXPECT_CONTAINS(m, "expected");
  }
}

TEST(ProfileDocument, AcceptedValueForms) {
  EXPECT_NO_THROW(parse_profile_document(R"({"workers_per_gpu": 0})", "a.json"));
  EXPECT_NO_THROW(parse_profile_document(R"({"workers_per_gpu": "auto"})", "a.json"));
  EXPECT_NO_THROW(parse_profile_document(R"({"headroom": 1})", "a.json"));
  EXPECT_NO_THROW(parse_profile_document(R"({"min_shm": 0, "max_shm": 1048576})", "a.json"));
  EXPECT_NO_THROW(parse_profile_document(R"({"sample_bytes": "1.5k"})", "a.json"));
  EXPECT_NO_THROW(parse_profile_document(R"({"schema": 1, "$schema": "profile.schema.json"})", "a.json"));
  EXPECT_NO_THROW(parse_profile_document(R"({"name": "vision/resnet50"})", "a.json"));
}

TEST(ProfileDocument, MalformedJsonGivesLineAndColumn) {
  // Line 3 lacks the comma after 64: the parser stops at the string that follows it.
  const std::string text =
      "{\n"
      "  \"name\": \"x\",\n"
      "  \"batch_size\": 64 \"pin_memory\": true\n"
      "}\n";
  std::string m = parse_error(text, "/p/x.json");
  ASSERT_EQ(m.rfind("/p/x.json:3:", 0), 0u) << m;
  // The unexpected token "pin_memory" spans columns 20..31 of line 3.
  int column = std::stoi(m.substr(std::string("/p/x.json:3:").size()));
  EXPECT_GE(column, 20) << m;
  EXPECT_LE(column, 32) << m;
  EXPECT_CONTAINS(m, "malformed JSON");
}

TEST(ProfileDocument, MalformedJsonOnFirstLineAndTruncated) {
  std::string m = parse_error("{\"a\": }", "x.json");
  EXPECT_EQ(m.rfind("x.json:1:", 0), 0u) << m;
  m = parse_error("{\n\"batch_size\": 1,\n", "x.json");
  EXPECT_EQ(m.rfind("x.json:3:", 0), 0u) << m;  // end of input after the newline on line 2
  m = parse_error("", "x.json");
  EXPECT_EQ(m.rfind("x.json:1:1:", 0), 0u) << m;
}

TEST(ProfileDocument, TopLevelMustBeAnObject) {
  EXPECT_CONTAINS(parse_error("[1, 2]"), "JSON object");
  EXPECT_CONTAINS(parse_error("\"imagenet\""), "JSON object");
}

TEST(ProfileFields, Validation) {
  auto with_fields = [](const std::string& fields) { return parse_error("{\"fields\": " + fields + "}"); };
  std::string m = with_fields(R"([{"name": "image", "shape": [3], "dtype": "float128"}])");
  EXPECT_CONTAINS(m, "'fields[0].dtype'");
  EXPECT_CONTAINS(m, "float32");  // lists the valid names
  m = with_fields(
      R"([{"name": "a", "shape": [1], "dtype": "int8"}, {"name": "b", "shape": [3, -224], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[1].shape[1]'");
  m = with_fields(R"([{"name": "a", "shape": [0], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].shape[0]'");
  m = with_fields(R"([{"name": "a", "shape": [2.5], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].shape[0]'");
  m = with_fields(R"([{"name": "a", "shape": 3, "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].shape'");
  m = with_fields(R"([{"name": "a", "shape": [1,1,1,1,1,1,1,1,1], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].shape'");
  // 2^30 * 2^30 elements in one sample is not a real workload.
  m = with_fields(R"([{"name": "a", "shape": [1073741824, 1073741824], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].shape'");
  m = with_fields(R"([{"name": "x", "shape": [1], "dtype": "int8"}, {"name": "x", "shape": [2], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[1].name'");
  EXPECT_CONTAINS(m, "duplicate field name 'x'");
  m = with_fields(R"([{"name": "", "shape": [1], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].name'");
  m = with_fields(R"([{"shape": [1], "dtype": "int8"}])");
  EXPECT_CONTAINS(m, "'fields[0].name'");
  m = with_fields(R"([{"name": "a", "shape": [1], "dtype": "int8", "layout": "nchw"}])");
  EXPECT_CONTAINS(m, "'fields[0].layout'");
  EXPECT_CONTAINS(m, "unknown key");
  m = with_fields(R"([{"name": "a", "shape": [1]}])");
  EXPECT_CONTAINS(m, "'fields[0].dtype'");
  m = with_fields(R"(["image"])");
  EXPECT_CONTAINS(m, "'fields[0]'");
}

TEST(ProfileDocument, FieldsAndSampleBytesExcludeEachOther) {
  std::string m = parse_error(R"({"fields": [{"name": "a", "shape": [], "dtype": "int8"}], "sample_bytes": 10})");
  EXPECT_CONTAINS(m, "team/x.json");
  EXPECT_CONTAINS(m, "'fields'");
  EXPECT_CONTAINS(m, "'sample_bytes'");
}

TEST(ProfileDocument, Calibration) {
  EXPECT_NO_THROW(parse_profile_document(
      R"({"calibration": {"peak_shm": "400m", "workers": 4, "batch_size": 64, "gpus": 1, "prefetch_factor": 2,
          "pin_memory": true, "measured_at": "2024-01-01T00:00:00Z"}})",
      "a.json"));
  std::string m = parse_error(R"({"calibration": {"workers": 4, "batch_size": 64, "gpus": 1, "prefetch_factor": 2}})");
  EXPECT_CONTAINS(m, "'calibration.peak_shm'");
  EXPECT_CONTAINS(m, "missing");
  m = parse_error(
      R"({"calibration": {"peak_shm": 1, "workers": 4, "batch_size": 64, "gpus": 1, "prefetch_factor": 2, "when": "x"}})");
  EXPECT_CONTAINS(m, "'calibration.when'");
  m = parse_error(
      R"({"calibration": {"peak_shm": 1, "workers": 4, "batch_size": 0, "gpus": 1, "prefetch_factor": 2}})");
  EXPECT_CONTAINS(m, "'calibration.batch_size'");
  m = parse_error(
      R"({"calibration": {"peak_shm": "lots", "workers": 4, "batch_size": 1, "gpus": 1, "prefetch_factor": 2}})");
  EXPECT_CONTAINS(m, "'calibration.peak_shm'");
}

TEST(ProfileMerge, ChildKeysWinAndParentKeysStay) {
  json parent = parse_profile_document(kComplete, "p.json");
  json child = parse_profile_document(R"({"name": "c", "extends": "imagenet", "batch_size": 8})", "c.json");
  json merged = merge_profile_documents(parent, child);
  EXPECT_EQ(merged["batch_size"], 8);
  EXPECT_EQ(merged["name"], "c");
  EXPECT_EQ(merged["nccl_reserve"], "1g");
  EXPECT_EQ(merged["fields"], parent["fields"]);
}

TEST(ProfileMerge, ChildFieldsReplaceParentSampleBytes) {
  json parent = {{"sample_bytes", 1000}, {"batch_size", 4}};
  json child = {{"fields", json::array({{{"name", "a"}, {"shape", json::array({2})}, {"dtype", "int8"}}})}};
  json merged = merge_profile_documents(parent, child);
  EXPECT_FALSE(merged.contains("sample_bytes"));
  EXPECT_TRUE(merged.contains("fields"));
  EXPECT_EQ(merged["batch_size"], 4);
}

TEST(ProfileMerge, ChildSampleBytesReplaceParentFields) {
  json parent = parse_profile_document(kComplete, "p.json");
  json merged = merge_profile_documents(parent, json{{"sample_bytes", "1m"}});
  EXPECT_FALSE(merged.contains("fields"));
  Profile p = profile_from_document(merged, "c.json");
  EXPECT_EQ(p.sample_bytes, std::optional<std::uint64_t>(1048576));
  EXPECT_TRUE(p.fields.empty());
  EXPECT_EQ(sample_bytes(p), 1048576u);
}

TEST(ProfileMerge, CalibrationIsNotInherited) {
  json parent = parse_profile_document(kComplete, "p.json");
  parent["calibration"] = {
      {"peak_shm", "400m"}, {"workers", 4}, {"batch_size", 64}, {"gpus", 1}, {"prefetch_factor", 2}};
  json merged = merge_profile_documents(parent, json{{"batch_size", 32}});
  EXPECT_FALSE(merged.contains("calibration"));
  EXPECT_FALSE(profile_from_document(merged, "c.json").calibration.has_value());
  // The child's own measurement is kept.
  json own = merge_profile_documents(parent, json{{"calibration", parent["calibration"]}});
  ASSERT_TRUE(own.contains("calibration"));
  Profile p = profile_from_document(own, "c.json");
  ASSERT_TRUE(p.calibration.has_value());
  EXPECT_EQ(p.calibration->peak_shm, 419430400u);  // 400 * 1048576
  EXPECT_EQ(p.calibration->workers, 4u);
  EXPECT_TRUE(p.calibration->pin_memory);  // defaults to the profile's pin_memory
}

TEST(ProfileFromDocument, MissingRequiredKeyNamesIt) {
  json doc = parse_profile_document(kComplete, "p.json");
  for (const char* key : {"batch_size", "prefetch_factor", "workers_per_gpu", "pin_memory", "headroom", "nccl_reserve",
                          "min_shm", "max_shm"}) {
    json d = doc;
    d.erase(key);
    std::string m = error_of([&] { profile_from_document(d, "/x/p.json"); });
    EXPECT_CONTAINS(m, "/x/p.json");
    EXPECT_CONTAINS(m, std::string("'") + key + "'");
    EXPECT_CONTAINS(m, "missing");
  }
  json d = doc;
  d.erase("fields");
  EXPECT_CONTAINS(error_of([&] { profile_from_document(d, "p.json"); }), "'fields'");
}

TEST(ProfileDocument, NcclAndLoadersOtherErrors) {
  EXPECT_CONTAINS(parse_error(R"({"nccl": {"channel": 2}})"), "'nccl.channel': unknown key");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "v", "batch": 2}]})"), "'loaders[0].batch': unknown key");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"batch_size": 2}]})"), "'loaders[0].name': missing");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "v"}, {"name": "v"}]})"), "duplicate loader name 'v'");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "v", "sample_bytes": 4, "fields": [{"name": "a", "shape": [],
      "dtype": "int8"}]}]})"),
                  "exclude each other");
}

TEST(ProfileDocument, LoaderOrderErrors) {
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "t"}, {"name": "v", "order": "after"}]})"),
                  "key 'loaders[1].order': expected \"any\" (the default");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "t"}, {"name": "v", "order": true}]})"), "got boolean");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "t", "order": "last"}, {"name": "v"}]})"),
                  "key 'loaders[0].order': the first loader is the training loader");
  EXPECT_CONTAINS(parse_error(R"({"loaders": [{"name": "t", "order": "first"}, {"name": "v", "order": "first"}]})"),
                  "key 'loaders[1].order': loaders[0] is already \"first\"");
}

TEST(ProfileFromDocument, LoaderOrderRoundTrips) {
  json doc = parse_profile_document(kComplete, "p.json");
  doc["loaders"] = parse_profile_document(
      R"({"loaders": [{"name": "train", "order": "first"}, {"name": "val"}, {"name": "test", "order": "last"}]})",
      "l")["loaders"];
  const Profile p = profile_from_document(doc, "p.json");
  ASSERT_EQ(p.loaders.size(), 3u);
  EXPECT_EQ(p.loaders[0].order, LoaderOrder::first);
  EXPECT_EQ(p.loaders[1].order, LoaderOrder::any);
  EXPECT_EQ(p.loaders[2].order, LoaderOrder::last);
  const json back = profile_to_json(p);
  EXPECT_EQ(back["loaders"][0]["order"], "first");
  EXPECT_FALSE(back["loaders"][1].contains("order"));  // the default is not written
  EXPECT_EQ(back["loaders"][2]["order"], "last");
  const Profile again = profile_from_document(parse_profile_document(back.dump(), "again"), "again");
  EXPECT_EQ(again.loaders[2].order, LoaderOrder::last);
}

TEST(ProfileFromDocument, NcclMeasuredWithItsRanksRoundTrips) {
  json doc = parse_profile_document(kComplete, "p.json");
  doc.erase("nccl_reserve");
  doc["nccl"] = parse_profile_document(R"({"nccl": {"measured": "73m", "measured_ranks": 2}})", "n")["nccl"];
  Profile p = profile_from_document(doc, "p.json");
  ASSERT_TRUE(p.nccl.has_value());
  EXPECT_EQ(p.nccl->measured, std::optional<std::uint64_t>(73 * 1048576));
  EXPECT_EQ(p.nccl->measured_ranks, std::optional<std::uint64_t>(2));
  // A measurement is written as the byte count (older versions wrote sizes such as "73m": read).
  const json back = profile_to_json(p);
  EXPECT_EQ(back["nccl"]["measured"], 73 * 1048576);
  EXPECT_EQ(back["nccl"]["measured_ranks"], 2);
}

TEST(ProfileFromDocument, NcclSectionAndLoaders) {
  json doc = parse_profile_document(kComplete, "p.json");
  doc.erase("nccl_reserve");
  doc["nccl"] =
      parse_profile_document(R"({"nccl": {"transport": "shm", "channels": 4, "buffsize": "1m"}})", "n")["nccl"];
  doc["loaders"] = parse_profile_document(
      R"({"loaders": [{"name": "train"}, {"name": "val", "batch_size": 256, "workers": "auto", "persistent_workers": true,
          "sample_bytes": "1k"}]})",
      "l")["loaders"];
  Profile p = profile_from_document(doc, "p.json");
  ASSERT_TRUE(p.nccl.has_value());
  EXPECT_EQ(p.nccl->transport, "shm");
  EXPECT_EQ(p.nccl->channels, 4u);
  EXPECT_EQ(p.nccl->buffsize, 1048576u);
  EXPECT_EQ(p.nccl->ll_buffsize, 524288u);      // NCCL's default
  EXPECT_EQ(p.nccl->ll128_buffsize, 4915200u);  // NCCL's default
  EXPECT_FALSE(p.nccl->measured.has_value());
  EXPECT_FALSE(p.nccl->measured_ranks.has_value());
  ASSERT_EQ(p.loaders.size(), 2u);
  EXPECT_EQ(p.loaders[0].name, "train");
  EXPECT_FALSE(p.loaders[0].batch_size.has_value());
  EXPECT_EQ(p.loaders[1].batch_size, std::optional<std::uint64_t>(256));
  EXPECT_TRUE(p.loaders[1].workers_auto);
  EXPECT_TRUE(p.loaders[1].persistent_workers);
  EXPECT_EQ(p.loaders[1].sample_bytes, std::optional<std::uint64_t>(1024));
  // The document form reads back to the same profile.
  Profile again = profile_from_document(parse_profile_document(profile_to_json(p).dump(), "again"), "again");
  EXPECT_EQ(again.nccl->channels, 4u);
  EXPECT_EQ(again.nccl->buffsize, 1048576u);
  ASSERT_EQ(again.loaders.size(), 2u);
  EXPECT_TRUE(again.loaders[1].workers_auto);
  EXPECT_EQ(again.loaders[1].sample_bytes, std::optional<std::uint64_t>(1024));
}

TEST(ProfileMerge, NcclSectionAndFlatReserveExcludeEachOther) {
  json parent = parse_profile_document(kComplete, "p.json");  // nccl_reserve 1g
  json with_section = merge_profile_documents(parent, parse_profile_document(R"({"nccl": {"transport": "p2p"}})", "c"));
  EXPECT_FALSE(with_section.contains("nccl_reserve"));
  EXPECT_EQ(with_section["nccl"]["transport"], "p2p");
  // A grandchild changes one key of the section and keeps the rest.
  json channels = merge_profile_documents(with_section, parse_profile_document(R"({"nccl": {"channels": 8}})", "g"));
  EXPECT_EQ(channels["nccl"]["transport"], "p2p");
  EXPECT_EQ(channels["nccl"]["channels"], 8);
  // A flat nccl_reserve below a section wins over it: existing profiles keep their figure.
  json flat = merge_profile_documents(channels, parse_profile_document(R"({"nccl_reserve": "2g"})", "f"));
  EXPECT_FALSE(flat.contains("nccl"));
  Profile p = profile_from_document(flat, "f.json");
  EXPECT_FALSE(p.nccl.has_value());
  EXPECT_EQ(p.nccl_reserve, 2u * 1073741824u);
}

TEST(ProfileDocument, EnginesErrorsNameTheKeyAndWhatWasExpected) {
  EXPECT_CONTAINS(parse_error(R"({"engines": {"sglang": {}}})"),
                  "team/x.json: key 'engines.sglang': unknown engine (expected deepspeed, ray, triton_python, vllm)");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"vllm": {"tp": 2}}})"),
                  "key 'engines.vllm.tp': unknown key (expected tensor_parallel_size, mq_max_chunk_bytes, "
                  "response_chunk_bytes, max_chunks, kv_offloading_size)");
  EXPECT_CONTAINS(parse_error(R"({"engines": []})"), "key 'engines': expected an object");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"vllm": 2}})"), "key 'engines.vllm': expected an object");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"vllm": {"tensor_parallel_size": 0}}})"),
                  "key 'engines.vllm.tensor_parallel_size': expected a whole number >= 1");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"vllm": {"mq_max_chunk_bytes": 0}}})"),
                  "key 'engines.vllm.mq_max_chunk_bytes': expected a size of at least 1 byte");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"vllm": {"max_chunks": "10"}}})"), "'engines.vllm.max_chunks'");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"ray": {"object_store_memory": "10m"}}})"),
                  "key 'engines.ray.object_store_memory': expected a size of at least 75 MiB (Ray refuses");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"ray": {"object_store_fraction": 1.5}}})"),
                  "key 'engines.ray.object_store_fraction': expected a number above 0 and at most 1");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"ray": {"plasma_directory": "tmp"}}})"),
                  "key 'engines.ray.plasma_directory': expected an absolute path");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"ray": {"object_store_memory": "1g", "object_store_fraction": 0.5}}})"),
                  "exclude each other");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"triton_python": {"shm_default_byte_size": "512k"}}})"),
                  "key 'engines.triton_python.shm_default_byte_size': expected a size of at least 1 MiB");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"triton_python": {"instances": 0}}})"),
                  "'engines.triton_python.instances'");
  EXPECT_CONTAINS(parse_error(R"({"engines": {"deepspeed": {"ranks": -1}}})"), "'engines.deepspeed.ranks'");
  EXPECT_CONTAINS(parse_error(R"({"nccl": {"host_mem": "pinned"}})"),
                  "key 'nccl.host_mem': expected \"shm\" (the SHM transport's buffers are files on /dev/shm) or "
                  "\"cumem\"");
  // The top-level message lists the section.
  EXPECT_CONTAINS(parse_error(R"({"engine": {}})"), "nccl, engines, min_shm");
}

TEST(ProfileFromDocument, EnginesAndTheirDefaults) {
  json doc = parse_profile_document(kComplete, "p.json");
  doc["engines"] = parse_profile_document(
      R"({"engines": {"vllm": {"tensor_parallel_size": 4, "mq_max_chunk_bytes": "1m"}, "ray": {"object_store_memory":
          "2g"}, "triton_python": {"instances": 3, "inflight_bytes": "8m"}, "deepspeed": {}}})",
      "e")["engines"];
  doc["nccl_reserve"] = "0";
  Profile p = profile_from_document(doc, "p.json");
  ASSERT_TRUE(p.engines.vllm && p.engines.ray && p.engines.triton_python && p.engines.deepspeed);
  EXPECT_EQ(p.engines.vllm->tensor_parallel_size, std::optional<std::uint64_t>(4));
  EXPECT_EQ(p.engines.vllm->mq_max_chunk_bytes, 1048576u);
  EXPECT_EQ(p.engines.vllm->response_chunk_bytes, 24u * 1048576);  // vLLM's MessageQueue default
  EXPECT_EQ(p.engines.vllm->max_chunks, 10u);
  EXPECT_EQ(p.engines.ray->object_store_memory, std::optional<std::uint64_t>(2u * 1073741824));
  EXPECT_EQ(p.engines.ray->object_store_cap, 200000000000u);
  EXPECT_EQ(p.engines.ray->plasma_directory, "/dev/shm");
  EXPECT_EQ(p.engines.triton_python->instances, 3u);
  EXPECT_EQ(p.engines.triton_python->shm_default_byte_size, 1048576u);  // Triton's default since r23.09
  EXPECT_EQ(p.engines.triton_python->inflight_bytes, 8u * 1048576);
  EXPECT_FALSE(p.engines.deepspeed->ranks.has_value());
  // Written and read back to the same engines.
  const json out = profile_to_json(p);
  EXPECT_EQ(out["engines"]["vllm"]["mq_max_chunk_bytes"], "1m");
  EXPECT_EQ(out["engines"]["ray"]["object_store_memory"], "2g");
  EXPECT_FALSE(out["engines"]["ray"].contains("object_store_fraction"));
  Profile back = profile_from_document(parse_profile_document(out.dump(), "out.json"), "out.json");
  EXPECT_EQ(back.engines.vllm->tensor_parallel_size, std::optional<std::uint64_t>(4));
  EXPECT_EQ(back.engines.vllm->mq_max_chunk_bytes, 1048576u);
  EXPECT_EQ(back.engines.ray->object_store_memory, p.engines.ray->object_store_memory);
  EXPECT_EQ(back.engines.triton_python->inflight_bytes, 8u * 1048576);
  EXPECT_TRUE(back.engines.deepspeed.has_value());
  // A profile without the section names no engine and writes none.
  Profile none = profile_from_document(parse_profile_document(kComplete, "p.json"), "p.json");
  EXPECT_TRUE(none.engines.empty());
  EXPECT_FALSE(profile_to_json(none).contains("engines"));
  // nccl.host_mem reads and writes back; the default "shm" is not written.
  json with_nccl = parse_profile_document(kComplete, "p.json");
  with_nccl.erase("nccl_reserve");
  with_nccl["nccl"] = parse_profile_document(R"({"nccl": {"host_mem": "cumem"}})", "n")["nccl"];
  Profile cumem = profile_from_document(with_nccl, "p.json");
  EXPECT_EQ(cumem.nccl->host_mem, "cumem");
  EXPECT_EQ(profile_to_json(cumem)["nccl"]["host_mem"], "cumem");
  cumem.nccl->host_mem = "shm";
  EXPECT_FALSE(profile_to_json(cumem)["nccl"].contains("host_mem"));
}

TEST(ProfileMerge, EnginesMergeEngineByEngineAndNullDropsOne) {
  json parent = parse_profile_document(
      R"({"engines": {"vllm": {"max_chunks": 10}, "ray": {"object_store_fraction": 0.3}}})", "p");
  json child = parse_profile_document(
      R"({"engines": {"vllm": {"mq_max_chunk_bytes": "1m"}, "ray": {"object_store_memory": "4g"},
          "deepspeed": {"ranks": 8}}})",
      "c");
  json merged = merge_profile_documents(parent, child);
  EXPECT_EQ(merged["engines"]["vllm"]["max_chunks"], 10);                    // kept
  EXPECT_EQ(merged["engines"]["vllm"]["mq_max_chunk_bytes"], "1m");          // added
  EXPECT_EQ(merged["engines"]["ray"]["object_store_memory"], "4g");          // the child's word wins...
  EXPECT_FALSE(merged["engines"]["ray"].contains("object_store_fraction"));  // ...over the fraction
  EXPECT_EQ(merged["engines"]["deepspeed"]["ranks"], 8);
  json dropped = merge_profile_documents(merged, parse_profile_document(R"({"engines": {"ray": null}})", "g"));
  EXPECT_FALSE(dropped["engines"].contains("ray"));
  EXPECT_TRUE(dropped["engines"].contains("vllm"));
  // A parent that wrote null for an engine (a standalone file) merges with a child that names it.
  json standalone = parse_profile_document(R"({"engines": {"ray": null}})", "s");
  json named = merge_profile_documents(
      standalone, parse_profile_document(R"({"engines": {"ray": {"object_store_memory": "1g"}}})", "n"));
  EXPECT_EQ(named["engines"]["ray"]["object_store_memory"], "1g");
  // A child without the section keeps the parent's.
  EXPECT_EQ(merge_profile_documents(merged, parse_profile_document(R"({"batch_size": 2})", "b"))["engines"],
            merged["engines"]);
}

TEST(ProfileMerge, NcclHostMemMergesLikeTheOtherKeys) {
  json parent = parse_profile_document(R"({"nccl": {"transport": "shm", "channels": 4}})", "p");
  json merged = merge_profile_documents(parent, parse_profile_document(R"({"nccl": {"host_mem": "cumem"}})", "c"));
  EXPECT_EQ(merged["nccl"]["channels"], 4);
  EXPECT_EQ(merged["nccl"]["host_mem"], "cumem");
}

TEST(ProfileFromDocument, MinAboveMaxIsAnError) {
  json doc = parse_profile_document(kComplete, "p.json");
  doc["min_shm"] = "2g";
  doc["max_shm"] = "1g";
  std::string m = error_of([&] { profile_from_document(doc, "p.json"); });
  EXPECT_CONTAINS(m, "'min_shm'");
  EXPECT_CONTAINS(m, "2GiB");
  EXPECT_CONTAINS(m, "1GiB");
}

TEST(ProfileToJson, RoundTrips) {
  json doc = parse_profile_document(kComplete, "p.json");
  doc["workers_per_gpu"] = 3;
  doc["calibration"] = {{"peak_shm", "400m"},   {"workers", 4},        {"batch_size", 64},     {"gpus", 2},
                        {"prefetch_factor", 2}, {"pin_memory", false}, {"measured_at", "then"}};
  Profile a = profile_from_document(doc, "p.json");
  json out = profile_to_json(a);
  // What profile_to_json writes must itself be a valid profile document.
  Profile b = profile_from_document(parse_profile_document(out.dump(), "out.json"), "out.json");
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.fields.size(), a.fields.size());
  EXPECT_EQ(b.workers_per_gpu, std::optional<std::uint64_t>(3));
  EXPECT_EQ(b.nccl_reserve, a.nccl_reserve);
  EXPECT_EQ(b.min_shm, a.min_shm);
  EXPECT_EQ(b.max_shm, a.max_shm);
  ASSERT_TRUE(b.calibration.has_value());
  EXPECT_EQ(b.calibration->peak_shm, 419430400u);
  EXPECT_EQ(b.calibration->gpus, 2u);
  EXPECT_FALSE(b.calibration->pin_memory);
  EXPECT_EQ(b.calibration->measured_at, "then");
  EXPECT_EQ(out["workers_per_gpu"], 3);
  // The measured peak as a byte count (older versions wrote "400m": read, above).
  EXPECT_EQ(out["calibration"]["peak_shm"], 419430400u);
  // Sizes in the largest exact unit, as a person writes them.
  EXPECT_EQ(out["nccl_reserve"], "1g");
  EXPECT_EQ(out["max_shm"], "256g");
  EXPECT_EQ(out["min_shm"], "256m");
}

TEST(ProfileToJson, ReadsWhatOlderVersionsWrote) {
  // Before one writer: the core wrote calibration.peak_shm in the largest exact unit, calibrate
  // nccl.measured in MiB or bytes with a "b". Both still load, to the same bytes.
  for (const char* old : {R"("peak_shm": "288648k")", R"("peak_shm": "295575552b")", R"("peak_shm": 295575552)"}) {
    json doc = parse_profile_document(kComplete, "p.json");
    doc.merge_patch(parse_profile_document(std::string(R"({"calibration": {)") + old +
                                               R"(, "workers": 2, "batch_size": 96, "gpus": 0,
                                               "prefetch_factor": 2}, "nccl": {"measured": "277073920b",
                                               "measured_ranks": 2}})",
                                           "old.json"));
    doc.erase("nccl_reserve");
    const Profile p = profile_from_document(doc, "old.json");
    EXPECT_EQ(p.calibration->peak_shm, 295575552u) << old;
    EXPECT_EQ(p.nccl->measured, std::optional<std::uint64_t>(277073920));
    EXPECT_EQ(profile_to_json(p)["calibration"]["peak_shm"], 295575552u);
  }
}

TEST(ProfileToJson, KeysInTheBuiltInsOrder) {
  Profile p = profile_from_document(parse_profile_document(kComplete, "p.json"), "p.json");
  p.calibration = Calibration{};
  std::vector<std::string> keys;
  const auto doc = profile_to_json(p);
  for (const auto& [key, value] : doc.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "description", "fields", "batch_size", "workers_per_gpu",
                                            "prefetch_factor", "pin_memory", "headroom", "nccl_reserve", "min_shm",
                                            "max_shm", "calibration"}));
}

TEST(ProfileFileDocument, WritesTheNamedKeysOverTheParent) {
  ProfileFile file;
  file.profile = profile_from_document(parse_profile_document(kComplete, "p.json"), "p.json");
  file.profile.name = "team/mine";
  file.profile.nccl = NcclSpec{};
  file.profile.nccl->measured = 19 * 1048576;
  file.profile.nccl->measured_ranks = 2;
  file.keys = {"batch_size", "nccl.measured", "nccl.measured_ranks", "description"};
  file.extends = "imagenet";
  const auto doc = profile_file_document(file);
  EXPECT_EQ(doc.dump(), R"({"name":"team/mine","description":"test","extends":"imagenet","batch_size":64,)"
                        R"("nccl":{"measured":19922944,"measured_ranks":2}})");
  // No "extends" key: the parent is default; standalone: null.
  file.extends.reset();
  EXPECT_FALSE(profile_file_document(file).contains("extends"));
  file.standalone = true;
  EXPECT_TRUE(profile_file_document(file)["extends"].is_null());
  // A key the profile has no value for is left out; every key gives the whole document.
  file.keys = {"sample_bytes", "nccl_reserve"};
  EXPECT_EQ(profile_file_document(file).dump(), R"({"name":"team/mine","extends":null})");
  file.keys = profile_document_keys();
  file.standalone = false;
  auto all = profile_file_document(file);
  all.erase("name");
  auto full = profile_to_json(file.profile);
  full.erase("name");
  EXPECT_EQ(all, full);
}

TEST(ProfileText, EnginesALineEach) {
  ProfileFile file;
  file.profile = profile_from_document(parse_profile_document(kComplete, "p.json"), "p.json");
  file.profile.engines.vllm = VllmSpec{};
  file.profile.engines.triton_python = TritonPythonSpec{};
  file.keys = {"engines"};
  const std::string text = profile_text(profile_file_document(file));
  EXPECT_EQ(text,
            "{\n"
            "  \"name\": \"imagenet\",\n"
            "  \"engines\": {\n"
            "    \"vllm\": {\"mq_max_chunk_bytes\": \"16m\", \"response_chunk_bytes\": \"24m\", \"max_chunks\": 10},\n"
            "    \"triton_python\": {\"instances\": 1, \"shm_default_byte_size\": \"1m\", \"shm_growth_byte_size\": "
            "\"1m\", \"inflight_bytes\": \"0\"}\n"
            "  }\n"
            "}\n");
  EXPECT_NO_THROW(parse_profile_document(text, "text.json"));
}

TEST(ProfileText, AsTheBuiltInsAreWritten) {
  ProfileFile file;
  file.profile = profile_from_document(parse_profile_document(kComplete, "p.json"), "p.json");
  file.profile.calibration = Calibration{1048576, 2, 96, 0, 2, true, "then", std::nullopt};
  file.keys = {"fields", "nccl_reserve", "calibration"};
  const std::string text = profile_text(profile_file_document(file));
  EXPECT_EQ(text,
            "{\n"
            "  \"name\": \"imagenet\",\n"
            "  \"fields\": [\n"
            "    {\"name\": \"image\", \"shape\": [3, 224, 224], \"dtype\": \"float32\"},\n"
            "    {\"name\": \"label\", \"shape\": [], \"dtype\": \"int64\"}\n"
            "  ],\n"
            "  \"nccl_reserve\": \"1g\",\n"
            "  \"calibration\": {\n"
            "    \"peak_shm\": 1048576,\n"
            "    \"workers\": 2,\n"
            "    \"batch_size\": 96,\n"
            "    \"gpus\": 0,\n"
            "    \"prefetch_factor\": 2,\n"
            "    \"pin_memory\": true,\n"
            "    \"measured_at\": \"then\"\n"
            "  }\n"
            "}\n");
  EXPECT_NO_THROW(parse_profile_document(text, "text.json"));
}

// profiles learn keeps its run's burst beside the peak; it reads back, and a bad one is refused.
TEST(ProfileText, ALearnedBurstIsWrittenAfterThePeakAndReadBack) {
  ProfileFile file;
  file.profile = profile_from_document(parse_profile_document(kComplete, "p.json"), "p.json");
  file.profile.calibration = Calibration{1048576, 2, 96, 0, 2, true, "then", 65536};
  file.keys = profile_document_keys();
  file.standalone = true;
  const std::string text = profile_text(profile_file_document(file));
  EXPECT_NE(text.find("    \"peak_shm\": 1048576,\n    \"burst_shm\": 65536,\n"), std::string::npos) << text;
  const Profile back = profile_from_document(parse_profile_document(text, "text.json"), "text.json");
  ASSERT_TRUE(back.calibration);
  EXPECT_EQ(back.calibration->burst_shm, std::optional<std::uint64_t>(65536));
  std::string bad = text;
  bad.replace(bad.find("65536"), 5, "\"lots\"");
  try {
    parse_profile_document(bad, "bad.json");
    FAIL() << "a burst that is not a size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("calibration.burst_shm"), std::string::npos) << e.what();
  }
}

TEST(ProfileName, Valid) {
  for (const char* n :
       {"imagenet", "multi-gpu", "vision/resnet50", "a", "0", "v1.2_x-y", "team/a.b", "nlp/bert-large"}) {
    EXPECT_TRUE(is_valid_profile_name(n)) << n;
  }
  EXPECT_TRUE(is_valid_profile_name(std::string(63, 'a')));  // 1 + 62
  EXPECT_TRUE(is_valid_profile_name(std::string(63, 'a') + "/" + std::string(63, 'b')));
}

TEST(ProfileName, Invalid) {
  for (const char* n :
       {"",   "..",      ".",  "../x", "x/..", "x/../y", "/etc/passwd", "a/b/c", "ImageNet", "imageNet",
        "-x", ".hidden", "_x", "a/",   "/a",   "a//b",   "a b",         "a\\b",  "team/.x",  "x.json/"}) {
    EXPECT_FALSE(is_valid_profile_name(n)) << n;
  }
  EXPECT_FALSE(is_valid_profile_name(std::string(64, 'a')));
  EXPECT_FALSE(is_valid_profile_name("team/" + std::string(64, 'a')));
  EXPECT_FALSE(is_valid_profile_name(std::string(64, 'a') + "/x"));
  EXPECT_FALSE(is_valid_profile_name(std::string("a\0b", 3)));
  EXPECT_FALSE(is_valid_profile_name("a\n"));
}

}  // namespace
}  // namespace gpurun

namespace gpurun {
namespace {

TEST(ProfileFuzzRegression, OutOfRangeNumberIsAnError) {
  EXPECT_THROW(parse_profile_document(R"({"batch_size":1e999})", "p.json"), Error);
}

}  // namespace
}  // namespace gpurun
