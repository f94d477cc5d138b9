#include "ctl/plan.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "engine/invocation.hpp"
#include "engine/run_args.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

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
  EXPECT_TRUE(plan.fits());
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

// The error of planning `profile` with `dir` on the profile path (and the built-in profiles).
Error plan_error(const fs::path& dir, const std::string& profile) {
  const EnvLookup env =
      test::fake_env({{"GPU_RUN_BUILTIN_PROFILES", GPU_RUN_SOURCE_PROFILES}, {"GPU_RUN_PROFILE_PATH", dir.string()}});
  PlanOptions o;
  o.sizing.profile = profile;
  return expect_error([&] { make_plan(o, Config{}, host_with_cpus(4), env); });
}

TEST(Plan, RefusesAProfileWhoseNameIsNotItsFiles) {
  test::TempDir d;
  d.write("mine.json", R"({"name": "other"})");
  const Error e = plan_error(d.path(), "mine");
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "key 'name': 'other' does not match the file's name");
}

// gpu-run-ctl plan's door: an unreadable profile file (a link to itself) is a wrong request, exit
// 2 (gpu-run-ctl(1)), with its errno and the errno's words.
TEST(Plan, AnUnreadableProfileReportsItsErrnoAndExitsTwo) {
  test::TempDir d;
  fs::create_symlink("loop.json", d.path() / "loop.json");
  const Error e = plan_error(d.path(), "loop");
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_EQ(e.errno_value(), ELOOP);
  EXPECT_CONTAINS(e.what(), (d.path() / "loop.json").string() + ": cannot open: " + std::strerror(ELOOP));
}

// gpu-run-ctl plan "sizes exactly as gpu-run would with the same flags": the same plan, field for
// field, from the one definition of the sizing flags (--gpu-request among them).
TEST(Plan, IsWhatGpuRunPlansForTheSameFlags) {
  const HostInfo host = host_with_cpus(8);
  const std::vector<std::vector<std::string>> cases = {
      {"--profile", "imagenet", "--gpus", "2"},
      {"--profile", "imagenet", "--gpus", "2", "--gpu-request", "none"},
      {"--profile", "imagenet", "--gpus", "1", "--gpu-request", "cdi", "--workers", "3", "--batch-size", "32"},
      {"--profile", "imagenet", "--gpu-request", "none", "--prefetch-factor", "4"},
  };
  for (const std::vector<std::string>& flags : cases) {
    std::vector<std::string> args = flags;
    args.push_back("img");
    const WrapperOptions w = split_wrapper_args(args);
    PlanOptions o;
    o.sizing = w.sizing;
    const nlohmann::json ctl = plan_to_json(make_plan(o, Config{}, host, builtin_only_env));
    const nlohmann::json run = plan_to_json(prepare_run(w, Config{}, host, builtin_only_env).plan);
    EXPECT_EQ(ctl, run) << args.size();
  }
  // --gpu-request none: imagenet's pinned loader runs without a pin thread, so the loop's batches
  // stay in /dev/shm (hold 3), where docker's GPUs give it one (hold 0).
  PlanOptions none;
  none.sizing.profile = "imagenet";
  none.sizing.gpus = "2";
  EXPECT_EQ(make_plan(none, Config{}, host, builtin_only_env).hold, 0u);
  none.sizing.gpu_request = "none";
  const ShmPlan pinned = make_plan(none, Config{}, host, builtin_only_env);
  EXPECT_EQ(pinned.hold, 3u);
  EXPECT_CONTAINS(pinned.hold_why, "--gpu-request none");
  none.sizing.gpu_request = "nvidia";
  EXPECT_CONTAINS(expect_error([&] { make_plan(none, Config{}, host, builtin_only_env); }).what(),
                  "--gpu-request 'nvidia': expected docker, cdi or none");
}

TEST(Plan, APlanThatDoesNotFitCarriesTheProblem) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.sizing.workers = "8";
  o.memory = "2g";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(8), builtin_only_env);
  ASSERT_TRUE(plan.refusal);
  EXPECT_EQ(plan.refusal->kind, RefusalKind::kOverBudget);
  // In the command line's words: the flags a person changes.
  const Error e = expect_error([&] { require_fits(plan, kFlagWords); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "raise --memory to at least");
  EXPECT_CONTAINS(e.what(), "or lower --workers (now 8) or --batch-size (now");
}

TEST(Plan, AdvisesOnlyWhatCanHelp) {
  // The refusal in the command line's words, "" when the plan fits.
  auto words = [](const ShmPlan& p) { return p.refusal ? refusal_words(*p.refusal, kFlagWords) : std::string(); };
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
  EXPECT_CONTAINS(words(floor), "raise --memory to at least 512m");
  EXPECT_CONTAINS(words(floor), "min_shm");
  EXPECT_EQ(words(floor).find("--workers"), std::string::npos) << words(floor);
  EXPECT_EQ(words(floor).find("--batch-size"), std::string::npos) << words(floor);
  // At min_shm with workers and a batch to spare: lowering them still does not move the size.
  o.sizing.workers = "1";
  o.sizing.batch_size = "64";
  const ShmPlan auto_floor = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  EXPECT_EQ(auto_floor.shm, auto_floor.min_shm);
  EXPECT_EQ(words(auto_floor).find("--workers"), std::string::npos) << words(auto_floor);
  // Above min_shm, each flag that can go lower is named with its value, and only those.
  o.sizing.gpus = "8";
  o.sizing.workers = "64";
  o.sizing.batch_size = "1";
  o.memory = "1g";
  const ShmPlan above = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  ASSERT_GT(above.shm, above.min_shm);
  EXPECT_CONTAINS(words(above), "lower --workers (now 64)");
  EXPECT_EQ(words(above).find("--batch-size"), std::string::npos) << words(above);
  EXPECT_EQ(words(above).find("min_shm"), std::string::npos) << words(above);
  o.sizing.gpus = "2";
  o.sizing.workers = "8";
  o.sizing.batch_size = "64";
  EXPECT_CONTAINS(words(make_plan(o, Config{}, host_with_cpus(2), builtin_only_env)),
                  "or lower --workers (now 8) or --batch-size (now 64)");
}

TEST(Plan, APlanThatDoesNotFitSaysSoInItsLastLine) {
  PlanOptions o;
  o.sizing.profile = "imagenet";
  o.sizing.gpus = "2";
  o.memory = "384m";
  const ShmPlan plan = make_plan(o, Config{}, host_with_cpus(2), builtin_only_env);
  const std::string text = plan_text(plan);
  EXPECT_EQ(text.find("gpu-run passes"), std::string::npos) << text;
  EXPECT_CONTAINS(text, "=> /dev/shm 256MiB does not fit: gpu-run starts nothing");
  // The problem is said once: by the error run_plan throws after the text, not in the text too.
  ASSERT_TRUE(plan.refusal);
  const std::string problem = expect_error([&] { require_fits(plan, kFlagWords); }).what();
  EXPECT_EQ(text.find(problem), std::string::npos) << text;
  EXPECT_EQ(text.find("DOES NOT FIT"), std::string::npos) << text;
  EXPECT_CONTAINS(text, "(the error below says what to change)");
  // The same for an engine's refusal (ray-worker with no memory limit).
  PlanOptions ray;
  ray.sizing.profile = "ray-worker";
  const ShmPlan unsized = make_plan(ray, Config{}, host_with_cpus(2), builtin_only_env);
  ASSERT_TRUE(unsized.refusal);
  const std::string ray_problem = expect_error([&] { require_fits(unsized, kFlagWords); }).what();
  EXPECT_EQ(plan_text(unsized).find(ray_problem), std::string::npos) << plan_text(unsized);
  o.memory = "4g";
  EXPECT_CONTAINS(plan_text(make_plan(o, Config{}, host_with_cpus(2), builtin_only_env)),
                  "=> /dev/shm 256MiB (gpu-run passes --shm-size 256m)\n");
}

}  // namespace
}  // namespace gpurun
