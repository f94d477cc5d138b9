#include "ctl/profiles/profiles_new.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "base/error.hpp"
#include "profiles/profile.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using test::TempDir;

TEST(ProfilesNew, FieldsFlagNamedUnnamedAndScalar) {
  const auto f = parse_fields_flag("3x224x224:float32,:int64,mask=1x64x64:uint8");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].name, "field1");
  EXPECT_EQ(f[0].shape, (std::vector<std::uint64_t>{3, 224, 224}));
  EXPECT_EQ(f[0].dtype, "float32");
  EXPECT_EQ(f[1].name, "field2");
  EXPECT_TRUE(f[1].shape.empty());
  EXPECT_EQ(f[1].dtype, "int64");
  EXPECT_EQ(f[2].name, "mask");
  EXPECT_EQ(f[2].shape, (std::vector<std::uint64_t>{1, 64, 64}));
  EXPECT_EQ(f[2].dtype, "uint8");
}

TEST(ProfilesNew, WrittenAsTheBuiltInsAre) {
  NewProfileOptions o;
  o.name = "vision/resnet50";
  o.fields = "image=3x224x224:float32,label=:int64";
  o.batch_size = "64";
  o.workers = "auto";
  o.prefetch_factor = "4";
  o.description = "ResNet-50";
  o.extends = "imagenet";
  EXPECT_EQ(profile_text(new_profile_document(o)),
            "{\n"
            "  \"name\": \"vision/resnet50\",\n"
            "  \"description\": \"ResNet-50\",\n"
            "  \"extends\": \"imagenet\",\n"
            "  \"fields\": [\n"
            "    {\"name\": \"image\", \"shape\": [3, 224, 224], \"dtype\": \"float32\"},\n"
            "    {\"name\": \"label\", \"shape\": [], \"dtype\": \"int64\"}\n"
            "  ],\n"
            "  \"batch_size\": 64,\n"
            "  \"workers_per_gpu\": \"auto\",\n"
            "  \"prefetch_factor\": 4\n"
            "}\n");
}

TEST(ProfilesNew, PyTorchDtypeNamesAreWrittenAsTheBuiltInsWriteThem) {
  const auto f = parse_fields_flag("image=3x8x8:float,label=:long,h=:half,d=:double,i=:int,t=:torch.bfloat16");
  ASSERT_EQ(f.size(), 6u);
  std::vector<std::string> dtypes;
  for (const auto& field : f) dtypes.push_back(field.dtype);
  EXPECT_EQ(dtypes, (std::vector<std::string>{"float32", "int64", "float16", "float64", "int32", "bfloat16"}));
  EXPECT_CONTAINS(expect_error([] { parse_fields_flag(":float128"); }).what(), "PyTorch's double float half");
}

TEST(ProfilesNew, ARealisticProfilePinMemoryNcclAndLoaders) {
  NewProfileOptions o;
  o.name = "seg/deeplab512";
  o.fields = "image=3x512x512:float,mask=512x512:long";
  o.batch_size = "8";
  o.pin_memory = "false";
  o.nccl_transport = "p2p";
  o.loaders = {"train:order=first", "val:batch_size=4,workers=2,persistent_workers=true,fields=3x512x512:half,:int",
               "test:order=last"};
  const nlohmann::ordered_json doc = new_profile_document(o);
  EXPECT_EQ(doc["pin_memory"], false);
  EXPECT_EQ(doc["nccl"], (nlohmann::ordered_json{{"transport", "p2p"}}));
  ASSERT_EQ(doc["loaders"].size(), 3u);
  EXPECT_EQ(doc["loaders"][0], (nlohmann::ordered_json{{"name", "train"}, {"order", "first"}}));
  EXPECT_EQ(doc["loaders"][2]["order"], "last");
  const auto& val = doc["loaders"][1];
  EXPECT_EQ(val["batch_size"], 4);
  EXPECT_EQ(val["workers"], 2);
  EXPECT_EQ(val["persistent_workers"], true);
  ASSERT_EQ(val["fields"].size(), 2u);
  EXPECT_EQ(val["fields"][0]["dtype"], "float16");
  EXPECT_EQ(val["fields"][1]["dtype"], "int32");
  // It loads as a profile: the second loader, p2p (no NCCL segments), pin_memory off.
  TempDir d;
  d.write("seg/deeplab512.json", profile_text(doc));
  const Profile p = ProfileStore({d.path(), GPU_RUN_SOURCE_PROFILES}).load("seg/deeplab512");
  EXPECT_FALSE(p.pin_memory);
  ASSERT_TRUE(p.nccl);
  EXPECT_EQ(p.nccl->transport, "p2p");
  ASSERT_EQ(p.loaders.size(), 3u);
  EXPECT_EQ(p.loaders[0].order, LoaderOrder::first);
  EXPECT_EQ(p.loaders[2].order, LoaderOrder::last);

  // Bad values name the flag.
  for (const auto& [bad, said] : std::vector<std::pair<std::string, std::string>>{
           {"val:batch_size=0", "key 'loaders[1].batch_size'"},
           {"val:colour=red", "--loader val: unknown key 'colour'"},
           {"val:batch_size", "--loader val: 'batch_size': expected KEY=VALUE"},
           {":batch_size=2", "--loader ':batch_size=2': expected NAME"},
           {"val:pin_memory=yes", "--loader val pin_memory 'yes': expected true or false"},
           {"val:fields=3x3:cheese", "--loader val fields: entry 1"},
           {"val:order=after", "key 'loaders[1].order': expected \"any\""}}) {
    NewProfileOptions b = o;
    b.loaders = {"train", bad};
    EXPECT_CONTAINS(expect_error([&] { new_profile_document(b); }).what(), said);
  }
  NewProfileOptions b = o;
  b.pin_memory = "maybe";
  EXPECT_CONTAINS(expect_error([&] { new_profile_document(b); }).what(),
                  "--pin-memory 'maybe': expected true or false");
  b = o;
  b.nccl_transport = "ib";
  EXPECT_CONTAINS(expect_error([&] { new_profile_document(b); }).what(), "nccl.transport");
}

TEST(ProfilesNew, BadFieldsNameTheEntry) {
  EXPECT_CONTAINS(error_of([] { parse_fields_flag(""); }), "--fields: empty");
  EXPECT_CONTAINS(error_of([] { parse_fields_flag("3x4:int8,3x4"); }), "--fields: entry 2 '3x4': expected");
  EXPECT_CONTAINS(error_of([] { parse_fields_flag("3xx4:int8"); }), "--fields: entry 1 dimension");
  EXPECT_CONTAINS(error_of([] { parse_fields_flag("=3:int8"); }), "entry 1");
  std::string many;
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string(":int8");
  EXPECT_CONTAINS(error_of([&] { parse_fields_flag(many); }), "more than 64 fields");
  // A dtype is named by its entry, as every other --fields error is.
  EXPECT_CONTAINS(error_of([] { parse_fields_flag("3:int8,3:float33"); }),
                  "--fields: entry 2 '3:float33': unknown dtype 'float33' (expected one of float64");
  NewProfileOptions o;
  o.name = "x";
  o.fields = "3:float33";
  const std::string m = error_of([&] { new_profile_document(o); });
  EXPECT_CONTAINS(m, "--fields: entry 1");
  EXPECT_EQ(m.find("fields[0]"), std::string::npos) << m;
}

TEST(ProfilesNew, AMinimalProfileLoadsWithDefaultsKeys) {
  NewProfileOptions o;
  o.name = "vision/resnet50";
  o.fields = "image=3x224x224:float32,label=:int64";
  o.batch_size = "64";
  o.workers = "auto";
  const auto doc = new_profile_document(o);
  EXPECT_FALSE(doc.contains("extends"));  // default, implicitly
  TempDir d;
  d.write("vision/resnet50.json", profile_text(doc));
  const ProfileStore store({d.path(), GPU_RUN_SOURCE_PROFILES});
  const Profile p = store.load("vision/resnet50");
  EXPECT_EQ(p.batch_size, 64u);
  EXPECT_EQ(p.fields.size(), 2u);
  EXPECT_DOUBLE_EQ(p.headroom, store.load("default").headroom);
}

TEST(ProfilesNew, ExtendsNoneIsStandaloneAndBadValuesAreRefused) {
  NewProfileOptions o;
  o.name = "solo";
  o.fields = ":int8";
  o.extends = "none";
  EXPECT_TRUE(new_profile_document(o)["extends"].is_null());
  o.extends.reset();
  o.batch_size = "0x10";
  EXPECT_CONTAINS(error_of([&] { new_profile_document(o); }), "--batch-size");
  o.batch_size.reset();
  o.workers = "many";
  EXPECT_CONTAINS(error_of([&] { new_profile_document(o); }), "--workers");
  o.workers.reset();
  o.name = "../x";
  EXPECT_CONTAINS(error_of([&] { new_profile_document(o); }), "'../x' is not a profile name");
}

TEST(ProfilesNew, WritesOnlyWhatLoadsAndNeverOverwritesWithoutForce) {
  TempDir d;
  NewProfileOptions o;
  o.name = "team/a";
  o.fields = "3x64x64:uint8";
  o.batch_size = "16";
  o.out_dir = d.path().string();
  setenv("GPU_RUN_BUILTIN_PROFILES", GPU_RUN_SOURCE_PROFILES, 1);
  std::ostringstream out;
  std::streambuf* old = std::cout.rdbuf(out.rdbuf());
  run_profiles_new(o);
  std::cout.rdbuf(old);
  EXPECT_CONTAINS(out.str(), "wrote " + (d / "team/a.json").string());
  EXPECT_EQ(test::read_text(d / "team/a.json"), profile_text(new_profile_document(o)));
  EXPECT_CONTAINS(error_of([&] { run_profiles_new(o); }), "exists: pass --force");
  // A parent that does not exist: refused, named as the new profile, nothing written.
  o.name = "team/b";
  o.extends = "nosuch";
  EXPECT_CONTAINS(error_of([&] { run_profiles_new(o); }),
                  "profiles new team/b: key 'extends': unknown parent profile 'nosuch'");
  EXPECT_FALSE(fs::exists(d / "team/b.json"));
}

// Issue 40: `profiles new myteam/bert` run as root wrote to root's ~/.config, which the runtime
// under dockerd (no HOME) never searches. Root's profiles go to the system directory; anyone
// else's to their own, with one line saying the runtime, hook and guard will not see it.
TEST(ProfilesNew, RootWritesWhereEveryDoorLooks) {
  const auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "HOME") return std::string("/root");
    return std::nullopt;
  };
  EXPECT_EQ(new_profile_dir(/*root=*/true, env), fs::path(kSystemProfileDir));
  EXPECT_EQ(new_profile_dir(/*root=*/false, env), fs::path("/root/.config/gpu-run/profiles"));
  const auto no_home = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  EXPECT_EQ(new_profile_dir(/*root=*/true, no_home), fs::path(kSystemProfileDir));
  EXPECT_CONTAINS(error_of([&] { new_profile_dir(false, no_home); }), "give --out-dir DIR");
}

TEST(ProfilesNew, SaysInOneLineWhenTheHostsDoorsWillNotSeeIt) {
  TempDir d;
  NewProfileOptions o;
  o.name = "myteam/bert";
  o.fields = "512:int64";
  o.batch_size = "8";
  o.out_dir = d.path().string();
  setenv("GPU_RUN_BUILTIN_PROFILES", GPU_RUN_SOURCE_PROFILES, 1);
  std::ostringstream out, err;
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  run_profiles_new(o);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  const std::string said = err.str();
  EXPECT_CONTAINS(said, "gpu-run-runtime, gpu-run-hook and the node guard");
  EXPECT_CONTAINS(said, std::string(kSystemProfileDir) + "/myteam/bert.json");
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
}

}  // namespace
}  // namespace gpurun
