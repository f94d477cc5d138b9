#include "ctl/profiles/calibrate.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/units.hpp"
#include "decision/sizing.hpp"
#include "profiles/profile.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

Profile base_profile() {
  Profile p;
  p.name = "default";
  p.fields = {{"image", {3, 224, 224}, "float32"}, {"label", {}, "int64"}};
  p.batch_size = 32;
  p.prefetch_factor = 2;
  p.pin_memory = true;
  p.headroom = 1.25;
  p.nccl_reserve = 512 * kMiB;
  p.min_shm = 64 * kMiB;
  p.max_shm = 256 * kGiB;
  return p;
}

Calibration measured() {
  Calibration c;
  c.peak_shm = 300 * kMiB;
  c.workers = 2;
  c.batch_size = 96;
  c.gpus = 0;
  c.prefetch_factor = 2;
  c.pin_memory = true;
  c.measured_at = "2026-12-02T15:48:08Z";
  return c;
}

// The text calibrate writes, through core's one writer.
std::string calibrated_text(const std::string& name, const Profile& base, const std::optional<std::string>& extends,
                            const Calibration& c, const std::optional<NcclMeasurement>& nccl = std::nullopt) {
  return profile_text(profile_file_document(calibrated_profile_file(name, "measured", base, extends, c, nccl)));
}

TEST(CalibrateTest, DocumentExtendsTheBaseAndValidates) {
  const std::string text = calibrated_text("team/mine", base_profile(), std::string("default"), measured());
  const auto parsed = parse_profile_document(text, "mine.json");
  EXPECT_EQ(parsed["name"], "team/mine");
  EXPECT_EQ(parsed["description"], "measured");
  EXPECT_EQ(parsed["extends"], "default");
  EXPECT_EQ(parsed["batch_size"], 96);
  EXPECT_EQ(parsed["workers_per_gpu"], 2);
  EXPECT_EQ(parsed["prefetch_factor"], 2);
  // The measured peak is a byte count, as every writer of a profile writes it.
  EXPECT_TRUE(parsed["calibration"]["peak_shm"].is_number_unsigned());
  EXPECT_EQ(parsed["calibration"]["peak_shm"], 300 * kMiB);
  EXPECT_EQ(parsed["calibration"]["measured_at"], "2026-12-02T15:48:08Z");
  // Only what differs from the parent.
  for (const char* key :
       {"fields", "sample_bytes", "pin_memory", "headroom", "nccl", "nccl_reserve", "min_shm", "max_shm", "loaders"})
    EXPECT_FALSE(parsed.contains(key)) << key;
  // The keys come in a person's order: name first, calibration last.
  EXPECT_LT(text.find("\"name\""), text.find("\"extends\""));
  EXPECT_LT(text.find("\"extends\""), text.find("\"batch_size\""));
  EXPECT_LT(text.find("\"batch_size\""), text.find("\"calibration\""));
  EXPECT_CONTAINS(text, "  \"calibration\": {\n    \"peak_shm\": 314572800,\n");
}

TEST(CalibrateTest, DocumentInlinesABaseWithoutAName) {
  Profile base = base_profile();
  base.loaders = {Loader{}, Loader{}};
  base.loaders[0].name = "train";
  base.loaders[1].name = "val";
  base.loaders[1].batch_size = 256;
  const std::string text = calibrated_text("mine", base, std::nullopt, measured());
  const auto parsed = parse_profile_document(text, "mine.json");
  EXPECT_FALSE(parsed.contains("extends"));
  // Complete on its own: it loads without a parent, as calibrated_profile says it does.
  const Profile p = profile_from_document(parsed, "mine.json");
  const Profile want = calibrated_profile("mine", base, measured());
  ASSERT_TRUE(p.calibration);
  EXPECT_EQ(p.calibration->peak_shm, 300 * kMiB);
  EXPECT_EQ(p.fields.size(), 2u);
  EXPECT_EQ(p.nccl_reserve, want.nccl_reserve);
  EXPECT_EQ(p.min_shm, want.min_shm);
  EXPECT_EQ(p.max_shm, want.max_shm);
  EXPECT_DOUBLE_EQ(p.headroom, want.headroom);
  ASSERT_EQ(p.loaders.size(), 2u);
  EXPECT_EQ(p.loaders[1].batch_size, std::optional<std::uint64_t>(256));
}

TEST(CalibrateTest, NcclSegmentsGoToTheNcclSection) {
  // A 2-rank run whose NCCL segments were 19 MiB: over the base's flat nccl_reserve.
  Calibration c = measured();
  c.gpus = 2;
  const NcclMeasurement nccl{19 * kMiB, 2};
  for (const std::optional<std::string>& extends :
       {std::optional<std::string>("default"), std::optional<std::string>()}) {
    const auto parsed = parse_profile_document(calibrated_text("mine", base_profile(), extends, c, nccl), "m");
    EXPECT_FALSE(parsed.contains("nccl_reserve"));
    EXPECT_EQ(parsed["nccl"]["measured"], 19 * kMiB);
    EXPECT_EQ(parsed["nccl"]["measured_ranks"], 2);
    // Over a parent: the measured keys only, the rest of the section comes from it.
    if (extends) {
      EXPECT_EQ(parsed["nccl"].size(), 2u);
    }
  }
  const Profile p = calibrated_profile("mine", base_profile(), c, nccl);
  SizingRequest r;
  r.gpus = 2;
  EXPECT_EQ(plan_shm(p, r).nccl, 19 * kMiB);
  r.gpus = 4;  // 4 x 2 connections a channel against 2 x 1
  EXPECT_EQ(plan_shm(p, r).nccl, 76 * kMiB);
  // Without a measurement the base's term stays.
  EXPECT_EQ(plan_shm(calibrated_profile("mine", base_profile(), c), r).nccl, 512 * kMiB);
}

TEST(CalibrateTest, PlanForTheMeasuredJobIsTheHeadroomTimesThePeak) {
  const Profile p = calibrated_profile("mine", base_profile(), measured());
  SizingRequest r;
  const ShmPlan plan = plan_shm(p, r);
  EXPECT_TRUE(plan.calibrated);
  EXPECT_EQ(plan.workers, 2u);
  EXPECT_EQ(plan.batch_size, 96u);
  EXPECT_GE(plan.shm, 300 * kMiB * 5 / 4);
  EXPECT_LE(plan.shm, 300 * kMiB * 5 / 4 + 2 * kMiB);
  // Twice the batch: twice the shm.
  r.batch_size = 192;
  EXPECT_NEAR(static_cast<double>(plan_shm(p, r).need), 2.0 * static_cast<double>(plan.need), 2.0 * kMiB);
}

TEST(CalibrateTest, GenerousShm) {
  HostInfo host;
  host.mem_available = 20 * kGiB;
  ShmPlan plan;
  plan.shm = 300 * kMiB;
  EXPECT_EQ(generous_shm(host, plan, std::nullopt), 10 * kGiB);
  host.mem_available = 64 * kGiB;
  EXPECT_EQ(generous_shm(host, plan, std::nullopt), 16 * kGiB);
  EXPECT_EQ(generous_shm(host, plan, 4 * kGiB), 4 * kGiB);
  plan.shm = 20 * kGiB;  // never below the plan
  EXPECT_EQ(generous_shm(host, plan, std::nullopt), 20 * kGiB);
}

}  // namespace
}  // namespace gpurun
