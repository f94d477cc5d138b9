#include "profiles_new.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "error.hpp"
#include "profile.hpp"
#include "profile_store.hpp"
#include "test_files.hpp"
#include "test_util.hpp"

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

}  // namespace
}  // namespace gpurun
