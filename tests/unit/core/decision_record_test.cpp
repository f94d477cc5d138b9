#include "decision/decision_record.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

DecisionRecord planned() {
  DecisionRecord r;
  r.door = "gpu-run-runtime";
  r.size = 512 * kMiB;
  r.need = 400 * kMiB;
  r.ceiling = 2 * kGiB;
  r.headroom = 96 * kMiB;
  r.batch_bytes = 48 * kMiB;
  r.profile = "imagenet";
  r.gpus = 2;
  r.workers = 1;
  r.batch_size = 64;
  r.reason = "plan";
  return r;
}

void expect_same(const DecisionRecord& a, const DecisionRecord& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.door, b.door);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.need, b.need);
  EXPECT_EQ(a.ceiling, b.ceiling);
  EXPECT_EQ(a.headroom, b.headroom);
  EXPECT_EQ(a.batch_bytes, b.batch_bytes);
  EXPECT_EQ(a.profile, b.profile);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.workers, b.workers);
  EXPECT_EQ(a.batch_size, b.batch_size);
  EXPECT_EQ(a.reason, b.reason);
}

TEST(DecisionRecord, RoundTripsThroughItsOneValue) {
  const DecisionRecord r = planned();
  const std::string text = decision_text(r);
  EXPECT_EQ(text.rfind("{\"version\":1,\"door\":\"gpu-run-runtime\",\"size\":536870912,", 0), 0u) << text;
  expect_same(parse_decision(text, "test"), r);
  DecisionRecord host = r;
  host.size.reset();  // the host's /dev/shm: no size applied
  expect_same(parse_decision(decision_text(host), "test"), host);
  EXPECT_NE(decision_text(host).find("\"size\":null"), std::string::npos);
}

TEST(DecisionRecord, FromADecisionItsPlansNeedHeadroomAndCeiling) {
  ShmDecision d;
  d.act = d.planned = true;
  d.size = 300 * kMiB;
  d.reason = "plan";
  ShmPlan p;
  p.profile = "imagenet";
  p.gpus = 2;
  p.ranks = 2;
  p.workers = 3;
  p.batch_size = 64;
  p.batch_bytes = 10 * kMiB;
  p.need = 280 * kMiB;
  p.max_shm = 8 * kGiB;
  p.memory_limit = 4 * kGiB;
  p.memory_fraction_max = 0.5;
  d.plan = p;
  const DecisionRecord r = decision_record(d, "gpu-run-hook");
  EXPECT_EQ(r.door, "gpu-run-hook");
  EXPECT_EQ(r.size, 300 * kMiB);
  EXPECT_EQ(r.need, 280 * kMiB);
  EXPECT_EQ(r.headroom, 2 * 3 * 10 * kMiB);  // ranks x workers x a batch
  EXPECT_EQ(r.batch_bytes, 10 * kMiB);
  EXPECT_EQ(r.ceiling, 2 * kGiB);  // the budget, below max_shm
  EXPECT_EQ(r.profile, "imagenet");
  EXPECT_EQ(r.workers, 3u);
  EXPECT_EQ(r.batch_size, 64u);
  // Not applied (the host's /dev/shm): no size; an emptyDir's sizeLimit given as the ceiling.
  const DecisionRecord host = decision_record(d, "gpu-run", /*applied=*/false, 1536 * kMiB);
  EXPECT_FALSE(host.size);
  EXPECT_EQ(host.ceiling, 1536 * kMiB);
  // Without max_shm or a memory limit the door knows no ceiling.
  d.plan->max_shm = 0;
  d.plan->memory_limit.reset();
  EXPECT_EQ(decision_record(d, "gpu-run").ceiling, 0u);
}

// A container writes its own labels and annotations: whatever it forges is refused with one
// line saying what, or read within bounds; never a crash, never an unbounded number.
TEST(DecisionRecord, HostileRecordsAreRefusedWithOneLine) {
  const struct {
    std::string text;
    const char* says;
  } cases[] = {
      {"", "not JSON"},
      {"{", "not JSON"},
      {"[1,2]", "expected a JSON object"},
      {"\"x\"", "expected a JSON object"},
      {"{}", "no \"version\""},
      {R"({"version":"1"})", "no \"version\""},
      {R"({"version":2})", "version 2, this gpu-run reads version 1"},
      {R"({"version":1,"ceiling":-1})", "\"ceiling\" must be a whole number"},
      {R"({"version":1,"ceiling":1.5})", "\"ceiling\" must be a whole number"},
      {R"({"version":1,"ceiling":"9g"})", "\"ceiling\" must be a whole number"},
      {R"({"version":1,"headroom":18446744073709551615})", "\"headroom\" of 18446744073709551615 is more than"},
      {R"({"version":1,"workers":99999999})", "\"workers\" of 99999999 is more than"},
      {R"({"version":1,"gpus":4096})", "\"gpus\" of 4096 is more than 1024"},
      {R"({"version":1,"profile":7})", "\"profile\" must be a string"},
      {R"({"version":1,"door":"a\u0007b"})", "\"door\" holds a control character"},
      {R"({"version":1,"size":true})", "\"size\" must be a whole number"},
      {"{\"version\":1,\"reason\":\"" + std::string(300, 'x') + "\"}", "\"reason\" of 300 bytes is longer than 256"},
      {"{\"version\":1,\"reason\":\"" + std::string(5000, 'x') + "\"}", "bytes, more than a record's 4096"},
      {std::string(2000, '[') + std::string(2000, ']'), "expected a JSON object"},
  };
  for (const auto& c : cases) {
    const Error e = expect_error([&] { parse_decision(c.text, "label gpu-run.decision"); });
    EXPECT_CONTAINS(e.what(), "label gpu-run.decision: ");
    EXPECT_CONTAINS(e.what(), c.says);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  // Unknown keys are a later version's additions: read past.
  EXPECT_EQ(parse_decision(R"({"version":1,"ceiling":5,"later":{"x":[1]}})", "t").ceiling, 5u);
}

TEST(DecisionRecord, TheHooksStateFileIsKeyedByAContainerIdOnly) {
  test::TempDir d;
  const fs::path dir = d.path() / "decisions";
  write_decision_state(dir, "abc123", planned());
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir / "abc123.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const Recorded r = read_recorded(RecordPlaces{nullptr, nullptr, nullptr, "abc123", dir});
  ASSERT_TRUE(r.record) << r.error;
  EXPECT_EQ(r.where, "hook state file");
  expect_same(*r.record, planned());
  remove_decision_state(dir, "abc123");
  EXPECT_FALSE(fs::exists(dir / "abc123.json"));
  for (const char* id : {"", ".", "..", "../x", "a/b", "a b", "x\n"})
    EXPECT_THROW(decision_state_path(dir, id), Error) << id;
  EXPECT_THROW(write_decision_state(dir, "../escape", planned()), Error);
  remove_decision_state(dir, "../escape");  // quietly nothing
}

TEST(DecisionRecord, TheNearestDoorWinsThenTheOldKeys) {
  test::TempDir d;
  DecisionRecord hook = planned();
  hook.door = "gpu-run-hook";
  write_decision_state(d.path(), "c1", hook);
  DecisionRecord runtime = planned();
  runtime.door = "gpu-run-runtime";
  DecisionRecord wrapper = planned();
  wrapper.door = "gpu-run";
  const std::map<std::string, std::string> annotations = {{kDecisionKey, decision_text(runtime)}};
  const std::map<std::string, std::string> labels = {{kDecisionKey, decision_text(wrapper)}, {kLabelProfile, "old"}};
  const std::map<std::string, std::string> env = {{"GPU_RUN_PROFILE", "old"}, {"GPU_RUN_NUM_WORKERS", "2"}};
  EXPECT_EQ(read_recorded({&labels, &annotations, &env, "c1", d.path()}).record->door, "gpu-run-hook");
  EXPECT_EQ(read_recorded({&labels, &annotations, &env, "c2", d.path()}).record->door, "gpu-run-runtime");
  const Recorded by_label = read_recorded({&labels, nullptr, &env, "c2", d.path()});
  EXPECT_EQ(by_label.record->door, "gpu-run");
  EXPECT_EQ(by_label.where, "label");
  // The webhook's record in the environment (a node whose runtime handler lets no pod annotation
  // into the spec): after the annotation and the label, before the old keys.
  DecisionRecord webhook = planned();
  webhook.door = "gpu-run-webhook";
  std::map<std::string, std::string> env_record = env;
  env_record[kEnvDecision] = decision_text(webhook);
  const Recorded by_env = read_recorded({nullptr, nullptr, &env_record, "c2", d.path()});
  EXPECT_EQ(by_env.record->door, "gpu-run-webhook");
  EXPECT_EQ(by_env.where, "environment");
  EXPECT_EQ(read_recorded({&labels, &annotations, &env_record, "c2", d.path()}).record->door, "gpu-run-runtime");
  EXPECT_EQ(read_recorded({&labels, nullptr, &env_record, "c2", d.path()}).record->door, "gpu-run");
  // Without a record: the old keys, as before it existed.
  const Recorded old = read_recorded({nullptr, nullptr, &env, "c2", d.path()});
  EXPECT_FALSE(old.record);
  EXPECT_TRUE(old.sized());
  EXPECT_EQ(old.legacy.profile, "old");
  EXPECT_EQ(old.legacy.workers, "2");
  // A forged record that cannot be read: said, the container still counted as sized, the old keys read.
  const std::map<std::string, std::string> forged = {{kDecisionKey, R"({"version":1,"ceiling":-5})"}};
  const Recorded bad = read_recorded({&forged, nullptr, &env, "c2", {}});
  EXPECT_FALSE(bad.record);
  EXPECT_TRUE(bad.sized());
  EXPECT_CONTAINS(bad.error, "label gpu-run.decision: \"ceiling\" must be a whole number");
  EXPECT_EQ(bad.legacy.profile, "old");
  // Nothing at all: not sized.
  EXPECT_FALSE(read_recorded({nullptr, nullptr, nullptr, "c2", d.path()}).sized());
}

// What a record may be trusted for: the job's shape within the guard's own limits, never a
// ceiling above them.
TEST(DecisionRecord, AForgedRecordNeverLiftsTheGuardsOwnLimits) {
  GuardLimits own;
  own.budget_bytes = kGiB;  // the budget of the container's real memory limit
  own.max_shm = 4 * kGiB;   // the host store's profile
  DecisionRecord forged = planned();
  forged.ceiling = 1ull << 49;
  forged.headroom = 1ull << 49;
  forged.need = 1ull << 49;
  forged.batch_bytes = 1ull << 49;
  GuardLimits l = guard_limits_of_record(forged, own, 64 * kGiB);
  EXPECT_EQ(l.max_shm, 4 * kGiB);  // the guard's own, kept
  EXPECT_EQ(l.recorded_ceiling, 1ull << 49);
  EXPECT_EQ(growth_ceiling(l, 0), kGiB);
  EXPECT_EQ(l.headroom, kGiB);  // held within the cap
  EXPECT_EQ(l.bound, kGiB);
  EXPECT_LE(l.batch, l.headroom);
  // Without any limit of its own, the host's memory holds the headroom.
  l = guard_limits_of_record(forged, GuardLimits{}, 64 * kGiB);
  EXPECT_EQ(l.headroom, 1ull << 49 < 64 * kGiB ? 1ull << 49 : 64 * kGiB);
  // An honest record lowers the ceiling to the door's and keeps the job's shape.
  l = guard_limits_of_record(planned(), own, 64 * kGiB);
  EXPECT_EQ(growth_ceiling(l, 0), kGiB);  // min(door's 2 GiB, budget 1 GiB)
  EXPECT_EQ(l.headroom, 96 * kMiB);
  EXPECT_EQ(l.bound, 400 * kMiB);
  EXPECT_EQ(l.batch, 48 * kMiB);
  DecisionRecord low = planned();
  low.ceiling = 700 * kMiB;
  EXPECT_EQ(growth_ceiling(guard_limits_of_record(low, own, 0), 0), 700 * kMiB);
  // The built-in "default" is a guess: no bound, only the headroom.
  DecisionRecord guess = planned();
  guess.profile = "default";
  l = guard_limits_of_record(guess, own, 0);
  EXPECT_EQ(l.bound, 0u);
  EXPECT_EQ(l.headroom, 96 * kMiB);
}

}  // namespace
}  // namespace gpurun
