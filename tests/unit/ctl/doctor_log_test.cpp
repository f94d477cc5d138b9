// doctor's reading of crashed jobs: the corpus in tests/data/crash-logs (real PyTorch 1.13
// output made here, and the PyTorch and NCCL lines users report upstream).
#include "doctor_log.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "doctor_render.hpp"
#include "test_util.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

std::string corpus(const std::string& name) {
  std::ifstream in(std::string(GPU_RUN_SOURCE_CRASH_LOGS) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

CrashFacts read(const std::string& name) {
  CrashFacts f;
  f.source = "log " + name;
  read_crash_log(corpus(name), f);
  return f;
}

std::string checks(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& x : findings) out += (out.empty() ? "" : ",") + x.check + "=" + level_name(x.level);
  return out;
}

TEST(DoctorLog, RealDataLoaderBusErrorOfTorch113) {
  const CrashFacts f = read("torch-1.13-dataloader-bus-error.log");
  EXPECT_EQ(f.lines, 42u);
  const auto findings = diagnose_crash(f);
  ASSERT_EQ(checks(findings), "dataloader-bus-error=FAIL");
  EXPECT_NE(findings[0].message.find("line 24: \"RuntimeError: DataLoader worker (pid 11357) is killed by signal: Bus"),
            std::string::npos)
      << findings[0].message;
  EXPECT_NE(findings[0].fix.find("gpu-run --profile NAME --gpus N"), std::string::npos);
  EXPECT_EQ(doctor_exit_code(findings), kDoctorExitFail);
  // The NUL byte PyTorch writes after its message does not hide the next line.
  std::size_t in_worker = 0;
  for (const auto& e : f.evidence) in_worker += e.kind == CrashEvidence::kBusErrorInWorker;
  EXPECT_EQ(in_worker, 1u);  // the same line twice counts once
}

TEST(DoctorLog, AJobGpuRunSizedThatStillCrashedIsNotSentBackToTheSameCommand) {
  CrashFacts f = read("torch-1.13-dataloader-bus-error.log");
  // What gpu-run --profile imagenet --gpus 2 recorded in the container's environment.
  f.profile = "imagenet";
  f.gpus = "2";
  f.workers = "1";
  f.batch_size = "64";
  f.planned_shm = 256 * kMiB;
  f.shm_size = 256 * kMiB;
  const auto findings = diagnose_crash(f);
  ASSERT_EQ(checks(findings), "dataloader-bus-error=FAIL");
  EXPECT_CONTAINS(findings[0].message,
                  "gpu-run sized this container: its plan for profile imagenet (2 GPU(s), 1 workers x batch 64 per "
                  "rank) of 256MiB was applied and was too small");
  EXPECT_CONTAINS(findings[0].fix, "gpu-run --guard --profile imagenet --gpus 2 --workers 1 --batch-size 64 IMAGE");
  EXPECT_CONTAINS(findings[0].fix, "gpu-run-ctl calibrate --out-profile NAME --profile imagenet --gpus 2");
  EXPECT_EQ(findings[0].fix.find("--gpus N"), std::string::npos) << findings[0].fix;
}

TEST(DoctorLog, NcclSegmentsWithTheirSize) {
  for (const auto& [file, bytes, failed] :
       {std::tuple<const char*, std::uint64_t, std::size_t>{"nccl-segment-no-space.log", 9637888, 2},
        {"nccl-2.10-segment-extend.log", 5967872, 1}}) {
    CrashFacts f = read(file);
    f.shm_size = 64 * kMiB;
    const auto findings = diagnose_crash(f);
    ASSERT_EQ(checks(findings), "nccl-shm=FAIL") << file;
    EXPECT_NE(findings[0].message.find("per segment (" + std::to_string(bytes) + " bytes)"), std::string::npos)
        << findings[0].message;
    EXPECT_EQ(findings[0].message.find("(" + std::to_string(failed) + " failed in this log)") != std::string::npos,
              failed > 1)
        << findings[0].message;
    EXPECT_NE(findings[0].message.find("64MiB (Docker's default)"), std::string::npos) << findings[0].message;
    EXPECT_NE(findings[0].fix.find("NCCL_SHM_DISABLE=1"), std::string::npos);
  }
}

TEST(DoctorLog, TorchSharedMemoryAllocationFailuresAcrossVersions) {
  for (const char* file : {"torch-share-fd-no-space.log", "torch-2-shm-allocate.log"}) {
    CrashFacts f = read(file);
    f.profile = "imagenet";
    const auto findings = diagnose_crash(f);
    ASSERT_EQ(checks(findings), "torch-shm-no-space=FAIL") << file;
    EXPECT_NE(findings[0].fix.find("gpu-run --profile imagenet"), std::string::npos) << findings[0].fix;
  }
}

TEST(DoctorLog, ExitStatus135IsABusError) {
  EXPECT_EQ(checks(diagnose_crash(read("sigbus-exit-135.log"))), "sigbus-exit=FAIL");
  CrashFacts quiet = read("healthy.log");
  EXPECT_EQ(checks(diagnose_crash(quiet)), "crash-log=OK");
  quiet.exit_code = 135;  // a container that printed nothing about it
  const auto findings = diagnose_crash(quiet);
  ASSERT_EQ(checks(findings), "sigbus-exit=FAIL");
  EXPECT_NE(findings[0].message.find("128 + SIGBUS"), std::string::npos);
}

TEST(DoctorLog, WorkersThatExitedWithoutABusErrorAreOnlyAWarning) {
  const auto findings = diagnose_crash(read("oom-killed-workers.log"));
  ASSERT_EQ(checks(findings), "dataloader-exited=WARN");
  EXPECT_NE(findings[0].message.find("OOM"), std::string::npos);
}

TEST(DoctorLog, HostileLogs) {
  CrashFacts f;
  // A line of a megabyte, control bytes, and a size that overflows: bounded, no crash.
  const std::string huge = std::string(1 << 20, 'x') + " is killed by signal: Bus error\n";
  read_crash_log(huge + "Error while creating shared memory segment /dev/shm/nccl-x (size 99999999999999999999999)\n" +
                     std::string("\x01\x02\x1b[31m", 6) + "\n",
                 f);
  ASSERT_EQ(f.evidence.size(), 2u);
  EXPECT_LE(f.evidence[0].text.size(), 243u);
  EXPECT_EQ(f.evidence[1].bytes, 9999999999999999999ull);  // 19 digits at most
  EXPECT_EQ(f.lines, 3u);
  // An NCCL line whose segment name lies past the part of the line that is kept.
  CrashFacts long_nccl;
  read_crash_log(std::string(300, ' ') + "x: Error while creating shared memory segment /dev/shm/nccl-a (size 5)\n",
                 long_nccl);
  EXPECT_EQ(checks(diagnose_crash(long_nccl)), "nccl-shm=FAIL");
  CrashFacts empty;
  read_crash_log("", empty);
  EXPECT_EQ(checks(diagnose_crash(empty)), "crash-log=OK");
}

TEST(DoctorLog, JsonCarriesTheEvidence) {
  const CrashFacts f = read("nccl-2.10-segment-extend.log");
  const auto j = crash_json(f, diagnose_crash(f));
  EXPECT_EQ(j["worst"], "FAIL");
  EXPECT_EQ(j["exit_code"], kDoctorExitFail);
  EXPECT_EQ(j["facts"]["evidence"][0]["kind"], "nccl-segment");
  EXPECT_EQ(j["facts"]["evidence"][0]["line"], 1);
  EXPECT_EQ(j["facts"]["evidence"][1]["bytes"], 5967872);
}

}  // namespace
}  // namespace gpurun
