#include "plan.hpp"

#include <gtest/gtest.h>

#include <string>

#include "config.hpp"
#include "error.hpp"
#include "test_files.hpp"
#include "test_fixtures.hpp"
#include "test_util.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

using test::builtin_only_env;
using test::host_with_cpus;

TEST(Plan, MatchesTheModelForTheBuiltInProfile) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "4";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_EQ(plan.profile, "imagenet");
  EXPECT_EQ(plan.ranks, 2u);
  EXPECT_EQ(plan.workers, 4u);
  EXPECT_TRUE(plan.problem.empty());
  EXPECT_GE(plan.shm, 256 * kMiB);
}

TEST(Plan, TheBatchAndItsFieldsAreWrittenAlike) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.batch_size = "256";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_CONTAINS(explain(plan), "batch_bytes  = 147MiB = image 147MiB + label 4KiB (page-rounded)");
}

TEST(Plan, CpusDescribeTheTargetMachineNotThisOne) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.cpus = "32";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  EXPECT_EQ(plan.cpus, 32u);
  EXPECT_GT(plan.workers, 2u);
}

TEST(Plan, DefaultsToTheConfigsDefaultProfile) {
  Config c;
  c.default_profile = "mnist";
  const ShmPlan plan = make_plan(PlanOptions{}, c, host_with_cpus(4), builtin_only_env);
  EXPECT_EQ(plan.profile, "mnist");
}

TEST(Plan, ArgumentErrorsNameTheFlag) {
  struct Case {
    void (*set)(PlanOptions&);
    const char* flag;
  };
  const Case cases[] = {
      {[](PlanOptions& o) { o.sizing.workers = "abc"; }, "--workers"},
      {[](PlanOptions& o) { o.sizing.workers = "-1"; }, "--workers"},
      {[](PlanOptions& o) { o.sizing.batch_size = "0"; }, "--batch-size"},
      {[](PlanOptions& o) { o.sizing.prefetch_factor = "1.5"; }, "--prefetch-factor"},
      {[](PlanOptions& o) { o.sizing.gpus = "two"; }, "--gpus"},
      {[](PlanOptions& o) { o.memory = "12q"; }, "--memory"},
      {[](PlanOptions& o) { o.cpus = "0"; }, "--cpus"},
      {[](PlanOptions& o) { o.sizing.profile = "no-such-profile"; }, "no-such-profile"},
      {[](PlanOptions& o) { o.sizing.profile = "../etc/passwd"; }, "not a valid profile name"},
  };
  for (const Case& c : cases) {
    PlanOptions o;
    o.sizing.profile = "imagenet";
    c.set(o);
    Error e = expect_error([&] { make_plan(o, Config{}, host_with_cpus(4), builtin_only_env); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << c.flag;
    EXPECT_CONTAINS(e.what(), c.flag);
  }
}

TEST(Plan, RefusesAProfileWhoseNameIsNotItsFiles) {
  test::TempDir d;
  d.write("mine.json", R"({"name": "other"})");
  const EnvLookup env = test::fake_env(
      {{"GPU_RUN_BUILTIN_PROFILES", GPU_RUN_SOURCE_PROFILES}, {"GPU_RUN_PROFILE_PATH", d.path().string()}});
  PlanOptions o;
  o.sizing.profile = "mine";
  const Error e = expect_error([&] { make_plan(o, Config{}, host_with_cpus(4), env); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "key 'name': 'other' does not match the file's name");
}

TEST(Plan, APlanThatDoesNotFitCarriesTheProblem) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "8";
  o.memory = "2g";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(8), builtin_only_env);
  EXPECT_CONTAINS(plan.problem, "memory limit");
  EXPECT_EQ(expect_error([&] { require_fits(plan); }).exit_code(), kExitUsage);
}

TEST(Plan, AdvisesOnlyWhatCanHelp) {
  // Workers 0 and batch 1: neither can be lowered; imagenet's need (a few MiB) sits under its
  // min_shm 256 MiB, so nothing the job's flags change lowers the size: memory or min_shm.
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "0";
  o.sizing.batch_size = "1";
  o.memory = "384m";
  const ShmPlan floor = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  EXPECT_EQ(floor.shm, floor.min_shm);
  EXPECT_CONTAINS(floor.problem, "raise --memory to at least 512m");
  EXPECT_CONTAINS(floor.problem, "min_shm");
  EXPECT_EQ(floor.problem.find("--workers"), std::string::npos) << floor.problem;
  EXPECT_EQ(floor.problem.find("--batch-size"), std::string::npos) << floor.problem;
  // At min_shm with workers and a batch to spare: lowering them still does not move the size.
  o.sizing.workers = "1";
  o.sizing.batch_size = "64";
  const ShmPlan auto_floor = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  EXPECT_EQ(auto_floor.shm, auto_floor.min_shm);
  EXPECT_EQ(auto_floor.problem.find("--workers"), std::string::npos) << auto_floor.problem;
  // Above min_shm, each flag that can go lower is named with its value, and only those.
  o.sizing.gpus = "8";
  o.sizing.workers = "64";
  o.sizing.batch_size = "1";
  o.memory = "1g";
  const ShmPlan above = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  ASSERT_GT(above.shm, above.min_shm);
  EXPECT_CONTAINS(above.problem, "lower --workers (now 64)");
  EXPECT_EQ(above.problem.find("--batch-size"), std::string::npos) << above.problem;
  EXPECT_EQ(above.problem.find("min_shm"), std::string::npos) << above.problem;
  o.sizing.gpus = "2";
  o.sizing.workers = "8";
  o.sizing.batch_size = "64";
  EXPECT_CONTAINS(make_plan(o, Config{}, host_with_cpus(2), builtin_only_env).problem,
                  "or lower --workers (now 8) or --batch-size (now 64)");
}

TEST(Plan, APlanThatDoesNotFitSaysSoInItsLastLine) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.memory = "384m";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  const std::string text = plan_text(plan);
  EXPECT_CONTAINS(text, "DOES NOT FIT");
  EXPECT_EQ(text.find("gpu-run passes"), std::string::npos) << text;
  EXPECT_CONTAINS(text, "=> /dev/shm 256MiB does not fit: gpu-run starts nothing");
  o.memory = "4g";
  EXPECT_CONTAINS(plan_text(make_plan(o, Config{}, host_with_cpus(2), builtin_only_env)),
                  "=> /dev/shm 256MiB (gpu-run passes --shm-size 256m)\n");
}

}  // namespace
}  // namespace gpurun
