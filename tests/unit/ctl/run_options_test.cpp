#include "ctl/run_options.hpp"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using Args = std::vector<std::string>;

TEST(RunOptionsTest, SplitsTheTailAndAddsRm) {
  RunOptions o;
  o.sizing.profile = "imagenet";
  o.args = {"-v", "/d:/d", "--batch-size", "16", "img", "python3", "train.py", "--workers", "{workers}"};
  WrapperOptions w = wrapper_options_for(o, "tune");
  EXPECT_EQ(w.image, "img");
  EXPECT_EQ(w.command, (Args{"python3", "train.py", "--workers", "{workers}"}));
  EXPECT_EQ(w.engine_options, (Args{"--rm", "-v", "/d:/d"}));
  EXPECT_EQ(w.sizing.profile, std::optional<std::string>("imagenet"));
  EXPECT_EQ(w.sizing.batch_size, std::optional<std::string>("16"));
  o.args = {"--rm=false", "img"};
  EXPECT_EQ(wrapper_options_for(o, "tune").engine_options, (Args{"--rm=false"}));
}

TEST(RunOptionsTest, UserErrorsNameTheFlag) {
  RunOptions o;
  try {
    wrapper_options_for(o, "calibrate");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "missing IMAGE");
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
  o.sizing.batch_size = "8";
  o.args = {"--batch-size", "16", "img"};
  try {
    wrapper_options_for(o, "tune");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "--batch-size");
  }
}

TEST(RunOptionsTest, SizingFlagsFillTheOneStruct) {
  CLI::App app;
  SizingFlags f;
  const SizingFlagOptions o = add_sizing_flags(app, f);
  app.parse(
      "--profile imagenet --gpus 2 --workers 3 --batch-size 4 --prefetch-factor 5 --profile-dir a --profile-dir b",
      false);
  EXPECT_EQ(f.profile, "imagenet");
  EXPECT_EQ(f.gpus, "2");
  EXPECT_EQ(f.workers, "3");
  EXPECT_EQ(f.batch_size, "4");
  EXPECT_EQ(f.prefetch_factor, "5");
  EXPECT_EQ(f.profile_dirs, (Args{"a", "b"}));
  EXPECT_NE(o.workers, nullptr);

  CLI::App without;
  SizingFlags g;
  EXPECT_EQ(add_sizing_flags(without, g, /*with_workers=*/false).workers, nullptr);
  EXPECT_THROW(without.parse("--workers 3", false), CLI::ParseError);
}

}  // namespace
}  // namespace gpurun
