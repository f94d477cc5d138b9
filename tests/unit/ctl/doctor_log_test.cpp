// doctor's reading of crashed jobs: the corpus in tests/data/crash-logs (logs copied from public
// issue threads, each with the cause its thread settled on, real PyTorch 1.13 output made here,
// and a few synthetic ones), listed with the diagnosis each must get in cases.json.
#include "ctl/doctor/doctor_log.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>

#include "base/units.hpp"
#include "ctl/doctor/doctor_render.hpp"
#include "support/test_util.hpp"

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

TEST(DoctorLog, AKubernetesJobIsToldThePodsWay) {
  // `kubectl logs POD | gpu-run-ctl doctor --for k8s --log -`: the pod's annotations, the webhook
  // and gpu-run-ctl k8s, not gpu-run's flags.
  CrashFacts f;
  f.door = CrashDoor::kKubernetes;
  read_crash_log(corpus("dataloader-bus-error-kubernetes-pytorch-16979.log"), f);
  auto findings = diagnose_crash(f);
  ASSERT_EQ(checks(findings), "dataloader-bus-error=FAIL");
  EXPECT_CONTAINS(findings[0].fix, "the annotations gpu-run.profile: NAME, gpu-run.workers: W, gpu-run.batch-size: B");
  EXPECT_CONTAINS(findings[0].fix, "in the pod's template");
  EXPECT_CONTAINS(findings[0].fix, "gpu-run-ctl k8s webhook-manifests");
  EXPECT_CONTAINS(findings[0].fix, "gpu-run-ctl k8s -f MANIFEST");
  EXPECT_NOT_CONTAINS(findings[0].fix, "gpu-run --profile");
  EXPECT_NOT_CONTAINS(findings[0].fix, "--shm-size");

  // `kubectl logs --prefix` marks the lines: Kubernetes without the flag, and the pod is named.
  std::string prefixed;
  std::istringstream in(corpus("torch-1.13-dataloader-bus-error.log"));
  for (std::string line; std::getline(in, line);) prefixed += "[pod/train-0/trainer] " + line + "\n";
  CrashFacts p;
  read_crash_log(prefixed, p);
  EXPECT_EQ(p.door, CrashDoor::kKubernetes);
  EXPECT_EQ(p.pod, "train-0");
  findings = diagnose_crash(p);
  ASSERT_EQ(checks(findings), "dataloader-bus-error=FAIL");
  EXPECT_CONTAINS(findings[0].fix, "in the template of pod train-0");

  // An engine with no profile term: the shm-size annotation or the emptyDir's sizeLimit.
  CrashFacts ray;
  ray.door = CrashDoor::kKubernetes;
  read_crash_log(corpus("ray-store-exceeds-shm-gpustack-5014.log"), ray);
  findings = diagnose_crash(ray);
  ASSERT_FALSE(findings.empty());
  EXPECT_CONTAINS(findings[0].fix, "the annotation gpu-run.shm-size: ");
  EXPECT_CONTAINS(findings[0].fix, "sizeLimit: ");
  EXPECT_NOT_CONTAINS(findings[0].fix, "gpu-run --shm-size");

  // Without either sign, the engine's terms as before.
  EXPECT_CONTAINS(diagnose_crash(read("torch-1.13-dataloader-bus-error.log"))[0].fix, "gpu-run --profile NAME");
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
                  "gpu-run sized this container: its plan for profile imagenet (2 GPU(s), 1 worker x batch 64 per "
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
  // /dev/shm named as the usual cause in a container, and how to tell it from the OOM killer.
  EXPECT_CONTAINS(findings[0].message, "most common one is a full /dev/shm");
  EXPECT_CONTAINS(findings[0].fix, "df -h /dev/shm");
  EXPECT_CONTAINS(findings[0].fix, "OOMKilled");
  // PyTorch's other wording, with the exit code, reads the same.
  CrashFacts f;
  read_crash_log(
      "RuntimeError: DataLoader worker (pid 59) exited unexpectedly with exit code 1. Details are lost due "
      "to multiprocessing. Rerunning with num_workers=0 may give better error trace.\n",
      f);
  EXPECT_EQ(checks(diagnose_crash(f)), "dataloader-exited=WARN");
}

TEST(DoctorLog, RaysOlderWordings) {
  // Ray 0.1 to 0.5 shrank the store; Ray 1.0 said "This may slow down performance!".
  const CrashFacts shrunk = read("ray-object-store-reduced-ray-3029.log");
  ASSERT_EQ(shrunk.evidence.size(), 1u);
  EXPECT_EQ(shrunk.evidence[0].kind, CrashEvidence::kRayStoreShrunk);
  EXPECT_EQ(shrunk.evidence[0].available, 65654784u);
  auto findings = diagnose_crash(shrunk);
  ASSERT_EQ(checks(findings), "ray-object-store=WARN");
  EXPECT_CONTAINS(findings[0].message, "shrank its object store");
  EXPECT_CONTAINS(findings[0].fix, "--object-store-memory");
  findings = diagnose_crash(read("ray-object-store-tmp-plasma-wording-ray-11951.log"));
  ASSERT_EQ(checks(findings), "ray-object-store=WARN");
  // The directory it names is the user's temp directory, /tmp/ray in recent releases.
  for (const char* dir : {"/tmp/ray", "/scratch/tmp"}) {
    CrashFacts f;
    read_crash_log(std::string("WARNING services.py:2248 -- WARNING: The object store is using ") + dir +
                       " instead of /dev/shm because /dev/shm has only 67108864 bytes available.\n",
                   f);
    ASSERT_EQ(f.evidence.size(), 1u) << dir;
    EXPECT_EQ(f.evidence[0].kind, CrashEvidence::kRayStoreOnTmp);
    EXPECT_EQ(f.evidence[0].available, 64 * kMiB);
  }
}

TEST(DoctorLog, TritonsRegionGetsTritonsAdviceUnlessItExists) {
  // A stale errno ("No such file or directory") or none at all: Triton's own --shm-size advice.
  for (const char* file :
       {"triton-shm-key-enoent-modelmesh-serving-78.log", "triton-shm-key-enoent-sagemaker-python-sdk-2801.log"}) {
    const auto findings = diagnose_crash(read(file));
    ASSERT_EQ(checks(findings), "triton-python-shm=WARN") << file;
    EXPECT_CONTAINS(findings[0].message, "\"No such file or directory\"");
    EXPECT_CONTAINS(findings[0].fix, "--shm-size");
    EXPECT_CONTAINS(findings[0].fix, "shm-default-byte-size");
    EXPECT_CONTAINS(findings[0].fix, "shm-region-prefix-name");
  }
  for (const auto& [line, check, bytes] : std::vector<std::tuple<std::string, std::string, std::uint64_t>>{
           // April 2021, lower case and no errno.
           {"unable to initialize shared-memory key '/add_sub_0_CPU_0' to requested size: 67108864 bytes",
            "triton-python-shm=WARN", 67108864},
           {"Failed to initialize the model instance add_sub_0 because it run out of shared memory. Increase the "
            "shared memory size to fix this error.",
            "triton-python-shm=FAIL", 0},
           {"Failed to increase the shared memory pool size for key '/m_0' to 67108864 bytes. There are no bytes "
            "available in /dev/shm.",
            "triton-python-shm=FAIL", 67108864},
           // June 2025 on: no key.
           {"Failed to increase the shared memory pool size to 134217728 bytes. If you are running Triton inside "
            "docker, use '--shm-size' flag to control the shared memory region size. Error: No space left on device",
            "triton-python-shm=FAIL", 134217728},
           {"Unable to initialize shared memory key 'triton_python_backend_shm_region_1' to requested size (1048576 "
            "bytes). If you are running Triton inside docker, use '--shm-size' flag to control the shared memory "
            "region size. Each Python backend model instance requires at least 1 MB of shared memory. Error: File "
            "exists",
            "triton-python-stub=WARN", 1048576},
       }) {
    CrashFacts f;
    read_crash_log(line + "\n", f);
    ASSERT_EQ(f.evidence.size(), 1u) << line;
    EXPECT_EQ(f.evidence[0].bytes.value_or(0), bytes) << line;
    EXPECT_EQ(checks(diagnose_crash(f)), check) << line;
  }
}

TEST(DoctorLog, ABusErrorInNcclsFramesIsNcclsSegments) {
  for (const char* file : {"nccl-sigbus-ucx-frames-pipedream-76.log", "nccl-sigbus-gdb-shm-open-jax-toolbox-183.log"}) {
    const CrashFacts f = read(file);
    ASSERT_FALSE(f.evidence.empty()) << file;
    EXPECT_EQ(f.evidence[0].kind, CrashEvidence::kSigbusExit);
    EXPECT_EQ(f.evidence[0].detail, "nccl");
    const auto findings = diagnose_crash(f);
    ASSERT_EQ(checks(findings), "sigbus-exit=FAIL") << file;
    EXPECT_EQ(findings[0].engine, "NCCL");
    EXPECT_CONTAINS(findings[0].message, "NCCL's own frames");
    EXPECT_CONTAINS(findings[0].fix, "NCCL_SHM_DISABLE=1");
    EXPECT_CONTAINS(findings[0].fix, "--shm-size");
  }
  // glog's form; and a bus error with no NCCL frame below keeps the general finding.
  CrashFacts glog;
  read_crash_log(
      "*** SIGBUS (@0x7f3a2c000000) received by PID 42 (TID 0x7f3a) from PID 0; stack trace: ***\n"
      "    @     0x7f3b1c2d3e4f  ncclShmOpen()\n",
      glog);
  auto findings = diagnose_crash(glog);
  ASSERT_EQ(checks(findings), "sigbus-exit=FAIL");
  EXPECT_EQ(findings[0].engine, "NCCL");
  CrashFacts bare;
  read_crash_log("[host:1:0:2] Caught signal 7 (Bus error: nonexistent physical address)\n 0 0x1 killpg()  ???:0\n",
                 bare);
  findings = diagnose_crash(bare);
  ASSERT_EQ(checks(findings), "sigbus-exit=FAIL");
  EXPECT_EQ(findings[0].engine, "");
}

TEST(DoctorLog, NcclsBareSystemErrorIsAWarningThatSaysHowToTell) {
  auto findings = diagnose_crash(read("nccl-unhandled-system-error-nccl-473.log"));
  ASSERT_EQ(checks(findings), "nccl-system-error=WARN");
  EXPECT_CONTAINS(findings[0].fix, "NCCL_DEBUG=INFO");
  EXPECT_CONTAINS(findings[0].fix, "NCCL_SHM_DISABLE=1");
  EXPECT_CONTAINS(findings[0].fix, "--shm-size");
  // NCCL 2.18's wording, as PyTorch wraps it.
  CrashFacts wrapped;
  read_crash_log(
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
      "ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL "
      "version 2.19.3\n",
      wrapped);
  EXPECT_EQ(checks(diagnose_crash(wrapped)), "nccl-system-error=WARN");
  // With NCCL's WARN lines the segment's own finding says it, and the warning stays out.
  findings = diagnose_crash(read("nccl-segment-no-space.log"));
  EXPECT_EQ(checks(findings).find("nccl-system-error"), std::string::npos) << checks(findings);
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

TEST(DoctorLog, QuotesALineWithoutItsColourEscapes) {
  // A logger's colours around its level word, and a bold span inside the message.
  CrashFacts f;
  read_crash_log(
      "\033[31mERROR\033[0m trainer: RuntimeError: DataLoader worker (pid 7) is killed by signal: "
      "\033[1mBus error\033[0m.\n",
      f);
  ASSERT_EQ(f.evidence.size(), 1u);
  EXPECT_EQ(f.evidence[0].text,
            "ERROR trainer: RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.");
  const auto findings = diagnose_crash(f);
  ASSERT_EQ(checks(findings), "dataloader-bus-error=FAIL");
  EXPECT_CONTAINS(findings[0].message, "line 1: \"ERROR trainer: RuntimeError");
  EXPECT_NOT_CONTAINS(findings[0].message, "[31m");
  EXPECT_NOT_CONTAINS(findings[0].message, "[0m");
  // A bracket that is not an escape's stays: "[rank0]", "[W CUDAAllocator]".
  CrashFacts ranks;
  read_crash_log("[rank0]: RuntimeError: DataLoader worker (pid 8) is killed by signal: Bus error.\n", ranks);
  ASSERT_EQ(ranks.evidence.size(), 1u);
  EXPECT_EQ(ranks.evidence[0].text.rfind("[rank0]: RuntimeError", 0), 0u) << ranks.evidence[0].text;
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

// --- The corpus: every case in cases.json, diagnosed as its thread settled ---

struct Case {
  nlohmann::json meta;
  std::vector<Finding> findings;
};

std::vector<Case> corpus_cases() {
  std::ifstream in(std::string(GPU_RUN_SOURCE_CRASH_LOGS) + "/cases.json");
  EXPECT_TRUE(in);
  const nlohmann::json all = nlohmann::json::parse(in);
  std::vector<Case> out;
  for (const nlohmann::json& c : all) {
    const CrashFacts f = read(c.at("file").get<std::string>());
    out.push_back({c, diagnose_crash(f)});
  }
  return out;
}

// A fix that sizes /dev/shm: what a failure that is not /dev/shm's must never get.
bool sizes_shm(const Finding& x) {
  for (const char* door : {"--shm-size", "gpu-run --profile", "gpu-run --guard", "gpu-run-ctl resize", "emptyDir"})
    if (x.fix.find(door) != std::string::npos) return true;
  return false;
}

const Finding* finding(const Case& c, const std::string& check) {
  for (const Finding& x : c.findings)
    if (x.check == check) return &x;
  return nullptr;
}

// The case got the finding its thread's cause calls for, at its level, with the fix in the
// engine's terms.
bool diagnosed_as_settled(const Case& c) {
  const Finding* x = finding(c, c.meta.at("expect_check").get<std::string>());
  return x && level_name(x->level) == c.meta.at("expect_level").get<std::string>() &&
         x->fix.find(c.meta.at("expect_fix").get<std::string>()) != std::string::npos;
}

TEST(DoctorLogCorpus, HoldsSixtyRealCasesWithTheirSourceAndCause) {
  const std::vector<Case> cases = corpus_cases();
  std::size_t real = 0;
  for (const Case& c : cases) {
    const std::string origin = c.meta.at("origin");
    ASSERT_TRUE(origin == "real" || origin == "synthetic" || origin == "generated") << c.meta.dump();
    EXPECT_FALSE(c.meta.at("source").get<std::string>().empty()) << c.meta.dump();
    EXPECT_FALSE(c.meta.at("cause").get<std::string>().empty()) << c.meta.dump();
    real += origin == "real";
  }
  EXPECT_GE(real, 60u);
  // Every log in the directory is a case, and every case a log there.
  std::size_t logs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GPU_RUN_SOURCE_CRASH_LOGS)) {
    if (entry.path().extension() != ".log") continue;
    ++logs;
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return c.meta.at("file") == name; }))
        << name << " is not in cases.json";
  }
  EXPECT_EQ(logs, cases.size());
}

TEST(DoctorLogCorpus, EveryCaseIsDiagnosedAsItsThreadSettled) {
  std::size_t shm_fail_expected = 0, shm_fail_right = 0, shm_cases = 0, shm_with_fail = 0;
  for (const Case& c : corpus_cases()) {
    const std::string file = c.meta.at("file");
    const std::string kind = c.meta.at("class");
    std::string got;
    for (const Finding& x : c.findings) got += " " + x.check + "=" + level_name(x.level);
    EXPECT_TRUE(diagnosed_as_settled(c)) << file << ": wanted " << c.meta.at("expect_check") << "="
                                         << c.meta.at("expect_level") << " with \"" << c.meta.at("expect_fix")
                                         << "\" in the fix; got" << got;
    if (kind == "lookalike" || kind == "fd" || kind == "healthy") {
      for (const Finding& x : c.findings) {
        EXPECT_FALSE(sizes_shm(x)) << file << ": " << x.check << " fix: " << x.fix;
      }
    }
    if (kind == "fd") {
      const Finding* x = finding(c, "fd-limit");
      ASSERT_NE(x, nullptr) << file;
      EXPECT_NE(x->fix.find("ulimit -n"), std::string::npos);
      EXPECT_NE(x->fix.find("set_sharing_strategy('file_system')"), std::string::npos);
    }
    if (kind != "shm") continue;
    ++shm_cases;
    shm_with_fail += std::any_of(c.findings.begin(), c.findings.end(),
                                 [](const Finding& x) { return x.level == Level::kFail && sizes_shm(x); });
    if (c.meta.at("expect_level") != "FAIL") continue;
    ++shm_fail_expected;
    shm_fail_right += diagnosed_as_settled(c);
  }
  std::cout << "corpus: " << shm_fail_right << " of " << shm_fail_expected
            << " /dev/shm crashes diagnosed FAIL with their fix; " << shm_with_fail << " of " << shm_cases
            << " /dev/shm cases (with Ray's /tmp fallback, a warning) given a FAIL\n";
  EXPECT_GE(shm_fail_right * 10, shm_fail_expected * 9);
}

TEST(DoctorLogCorpus, NumbersEnginesAndRewrappedLines) {
  // vLLM's required and free bytes, Ray's store and /dev/shm, Triton's region, NCCL's segment.
  CrashFacts vllm = read("vllm-insufficient-shm-intel-xpu-backend-for-triton-7763.log");
  ASSERT_EQ(vllm.evidence.size(), 1u);
  EXPECT_EQ(vllm.evidence[0].bytes, 160 * kMiB);
  EXPECT_EQ(vllm.evidence[0].available, 64 * kMiB);
  auto findings = diagnose_crash(vllm);
  ASSERT_EQ(checks(findings), "vllm-shm=FAIL");
  EXPECT_CONTAINS(findings[0].message, "It needs 160MiB and 64MiB was free");
  EXPECT_CONTAINS(findings[0].fix, "gpu-run --shm-size 160m");
  EXPECT_EQ(findings[0].engine, "vLLM");

  CrashFacts ray = read("ray-store-exceeds-shm-gpustack-5014.log");
  ASSERT_FALSE(ray.evidence.empty());
  EXPECT_EQ(ray.evidence[0].bytes, 10200547328u);
  EXPECT_EQ(ray.evidence[0].available, 9663676416u);
  CrashFacts ray_gb = read("ray-object-store-exceeds-kiirkirjutaja-5.log");
  ASSERT_FALSE(ray_gb.evidence.empty());
  EXPECT_EQ(ray_gb.evidence[0].bytes, 11811143680u);

  // Ray's warning re-wrapped over five lines still gives its number; Ray's advice on one line.
  CrashFacts wrapped = read("ray-object-store-tmp-wrapped-open-instruct-1067.log");
  ASSERT_EQ(wrapped.evidence.size(), 1u);
  EXPECT_EQ(wrapped.evidence[0].line, 1u);
  EXPECT_EQ(wrapped.evidence[0].available, 5368709120u);
  CrashFacts advice = read("ray-object-store-tmp-llmaz-238.log");
  ASSERT_EQ(advice.evidence.size(), 1u);
  EXPECT_EQ(advice.evidence[0].available, 64 * kMiB);
  EXPECT_EQ(advice.evidence[0].detail, "5.04gb");

  // "killed by signal: Bus\nerror." as a terminal wrapped it.
  const CrashFacts bus = read("dataloader-bus-error-rewrapped-fastai-docker-containers-21.log");
  ASSERT_EQ(bus.evidence.size(), 1u);
  EXPECT_EQ(bus.evidence[0].kind, CrashEvidence::kWorkerKilledByBusError);

  CrashFacts triton = read("triton-shm-key-server-6195.log");
  ASSERT_EQ(triton.evidence.size(), 1u);
  EXPECT_EQ(triton.evidence[0].bytes, 67108864u);
  EXPECT_EQ(triton.evidence[0].detail, "No space left on device");
  findings = diagnose_crash(triton);
  EXPECT_CONTAINS(findings[0].message, "triton_python_backend_shm_region_3");

  // NCCL before 2.12: the segment's name without /dev/shm, and its size.
  findings = diagnose_crash(read("nccl-posix-fallocate-nccl-525.log"));
  ASSERT_EQ(checks(findings), "nccl-shm=FAIL");
  EXPECT_CONTAINS(findings[0].message, "per segment (9637888 bytes)");

  // Rank prefixes and timestamps: torchrun's, DeepSpeed's, Docker Desktop's.
  const CrashFacts rank = read("oom-dataloader-killed-rank-prefix-megatron-lm-1657.log");
  EXPECT_EQ(checks(diagnose_crash(rank)), "oom-killed=FAIL");
  const CrashFacts ds = read("deepspeed-return-7-lmflow-454.log");
  EXPECT_EQ(ds.engines, std::vector<std::string>{"DeepSpeed"});
  findings = diagnose_crash(ds);
  EXPECT_CONTAINS(findings[0].fix, "deepspeed_allreduce_buffer_");
}

TEST(DoctorLogCorpus, ExitStatusesAreSignals) {
  for (const auto& [line, check] : std::vector<std::pair<std::string, std::string>>{
           {"  exitcode  : -7 (pid: 100)", "sigbus-exit=FAIL"},
           {"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0",
            "oom-killed=FAIL"},
           {"[ERROR] [launch.py:321:sigkill_handler] ['python'] exits with return code = -11", "segfault=WARN"},
           {"Process finished with exit code 137", "oom-killed=FAIL"},
           {"[ERROR] [launch.py:321:sigkill_handler] ['python'] exits with return code = 1", "crash-log=OK"},
           {"RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode", "crash-log=OK"},
           {"OSError: [Errno 28] No space left on device: '/dev/shm/joblib_memmapping_folder_1/x.pkl'",
            "shm-no-space=FAIL"},
           {"OSError: [Errno 28] No space left on device: '/data/ckpt/last.pt'", "disk-full=WARN"},
       }) {
    CrashFacts f;
    read_crash_log(line + "\n", f);
    EXPECT_EQ(checks(diagnose_crash(f)), check) << line;
  }
  CrashFacts killed;
  killed.exit_code = 137;
  EXPECT_EQ(checks(diagnose_crash(killed)), "oom-killed=FAIL");
  CrashFacts segv;  // a container that printed nothing about it
  segv.exit_code = 139;
  EXPECT_EQ(checks(diagnose_crash(segv)), "segfault=WARN");
}

}  // namespace
}  // namespace gpurun
