#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/units.hpp"
#include "ctl/doctor/doctor_log.hpp"
#include "ctl/doctor/doctor_render.hpp"
#include "ctl/doctor/doctor_rules.hpp"
#include "decision/decision_record.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

// A container gpu-run sized: 1.4GiB private tmpfs, a little used, 8 CPUs, no limits.
DoctorFacts sized() {
  DoctorFacts f;
  f.target = "container t1 (3f2a9c1b0e4d, docker)";
  f.from_host = true;
  f.engine = "docker";
  f.shm_mount = ShmMount::kTmpfs;
  f.shm_size = 1464 * kMiB;
  f.shm_used = 10 * kMiB;
  f.shm_is_host = false;
  f.ipc = parse_ipc_mode("private");
  f.cpus = 8;
  f.cpus_source = "affinity 8";
  f.env = {{"GPU_RUN_PROFILE", "imagenet"},
           {"GPU_RUN_NUM_WORKERS", "4"},
           {"GPU_RUN_BATCH_SIZE", "64"},
           {"GPU_RUN_SHM_SIZE", "1464m"}};
  return f;
}

// A plain `docker run`: the 64MiB default, nothing from gpu-run.
DoctorFacts plain() {
  DoctorFacts f = sized();
  f.shm_size = 64 * kMiB;
  f.shm_used = 0;
  f.env.clear();
  return f;
}

const Finding* find(const std::vector<Finding>& findings, const std::string& check) {
  for (const auto& x : findings)
    if (x.check == check) return &x;
  return nullptr;
}

// The level of `check`, failing the test when it is absent.
Level level_of(const DoctorFacts& f, const std::string& check) {
  const auto findings = diagnose(f);
  const Finding* x = find(findings, check);
  EXPECT_NE(x, nullptr) << "no finding " << check;
  return x ? x->level : Level::kOk;
}

Finding finding(const DoctorFacts& f, const std::string& check) {
  const auto findings = diagnose(f);
  const Finding* x = find(findings, check);
  EXPECT_NE(x, nullptr) << "no finding " << check;
  return x ? *x : Finding{};
}

TEST(Doctor, SizedContainerIsAllOk) {
  const auto findings = diagnose(sized());
  for (const auto& x : findings) EXPECT_EQ(x.level, Level::kOk) << x.check << ": " << x.message;
  EXPECT_EQ(worst_level(findings), Level::kOk);
  EXPECT_EQ(doctor_exit_code(findings), 0);
  for (const char* check : {"ipc", "shm-size", "sizing", "shm-use", "memory", "workers", "torch-leftovers", "nccl"})
    EXPECT_NE(find(findings, check), nullptr) << check;
  EXPECT_EQ(find(findings, "shm-mount"), nullptr);
  EXPECT_EQ(find(findings, "shmmax"), nullptr);
}

TEST(Doctor, DockerDefaultFailsWithTheRightFixAndNotShmmax) {
  const auto findings = diagnose(plain());
  const Finding* x = find(findings, "shm-size");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->level, Level::kFail);
  EXPECT_CONTAINS(x->message, "64MiB, Docker's default");
  EXPECT_CONTAINS(x->fix, "gpu-run --profile");
  EXPECT_CONTAINS(x->fix, "--shm-size");
  // It corrects the folklore rather than repeating it.
  EXPECT_CONTAINS(x->fix, "kernel.shmmax");
  EXPECT_CONTAINS(x->fix, "does not help");
  EXPECT_EQ(doctor_exit_code(findings), kDoctorExitFail);
  EXPECT_EQ(find(findings, "sizing"), nullptr) << "nothing asked for a size";
}

TEST(Doctor, PodmanDefaultIsTheSame64MiB) {
  DoctorFacts f = plain();
  f.engine = "podman";
  f.shm_size = 64000 * 1024;  // podman 4's 65536000 bytes
  EXPECT_EQ(level_of(f, "shm-size"), Level::kFail);
  EXPECT_CONTAINS(finding(f, "shm-size").message, "podman's default");
  EXPECT_CONTAINS(finding(f, "shm-size").fix, "does not help");
}

TEST(Doctor, BelowTheDefaultFails) {
  DoctorFacts f = plain();
  f.shm_size = 32 * kMiB;
  EXPECT_EQ(level_of(f, "shm-size"), Level::kFail);
  EXPECT_CONTAINS(finding(f, "shm-size").message, "32MiB, at or below the engines' defaults");
  f.shm_size = 4 * kMiB;
  EXPECT_EQ(level_of(f, "shm-size"), Level::kFail);
}

TEST(Doctor, JustAboveTheDefaultIsOk) {
  DoctorFacts f = plain();
  f.shm_size = 64 * kMiB + 4096;
  EXPECT_EQ(level_of(f, "shm-size"), Level::kOk);
  f.shm_size = 2 * kGiB;
  EXPECT_EQ(level_of(f, "shm-size"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "shm-size").message, "2GiB (tmpfs)");
}

TEST(Doctor, NoShmAtAllFails) {
  DoctorFacts f = plain();
  f.ipc = parse_ipc_mode("none");
  f.shm_mount = ShmMount::kMissing;
  f.shm_size = 0;
  const auto findings = diagnose(f);
  const Finding* x = find(findings, "shm-mount");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->level, Level::kFail);
  EXPECT_CONTAINS(x->message, "no /dev/shm (ipc mode none)");
  EXPECT_CONTAINS(x->fix, "--ipc=none");
  // Checks about a /dev/shm that is not there are skipped; the ipc check does not repeat it.
  for (const char* check : {"shm-size", "shm-use", "memory", "torch-leftovers", "nccl", "ipc"})
    EXPECT_EQ(find(findings, check), nullptr) << check;
  EXPECT_NE(find(findings, "workers"), nullptr);
  EXPECT_EQ(doctor_exit_code(findings), kDoctorExitFail);
}

TEST(Doctor, ShmThatIsOnlyADirectoryOfDevFails) {
  DoctorFacts f = plain();
  f.shm_mount = ShmMount::kNotMount;
  f.ipc = parse_ipc_mode("none");
  const Finding x = finding(f, "shm-mount");
  EXPECT_EQ(x.level, Level::kFail);
  EXPECT_CONTAINS(x.message, "plain directory of /dev");
  EXPECT_EQ(find(diagnose(f), "shm-size"), nullptr);
}

TEST(Doctor, ShmThatIsNotATmpfsWarns) {
  DoctorFacts f = sized();
  f.shm_mount = ShmMount::kNotTmpfs;
  f.shm_size = 100 * kGiB;
  EXPECT_EQ(level_of(f, "shm-mount"), Level::kWarn);
  EXPECT_CONTAINS(finding(f, "shm-size").message, "not a tmpfs");
}

TEST(Doctor, IpcModes) {
  DoctorFacts f = sized();
  for (const char* mode : {"private", "shareable"}) {
    f.ipc = parse_ipc_mode(mode);
    EXPECT_EQ(level_of(f, "ipc"), Level::kOk) << mode;
    EXPECT_CONTAINS(finding(f, "ipc").message, mode);
  }
  f.ipc = parse_ipc_mode("container:trainer");
  EXPECT_EQ(level_of(f, "ipc"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "ipc").message, "shares trainer's");
  f.ipc.reset();
  EXPECT_EQ(level_of(f, "ipc"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "ipc").message, "not reported by docker");
  f.from_host = false;
  EXPECT_CONTAINS(finding(f, "ipc").message, "own IPC namespace");
}

TEST(Doctor, IpcHostWarnsThatSizingDoesNotApply) {
  DoctorFacts f = plain();
  f.ipc = parse_ipc_mode("host");
  f.shm_size = 24 * kGiB;
  f.shm_is_host = true;
  const Finding x = finding(f, "ipc");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "host's");
  EXPECT_CONTAINS(x.message, "sizing does not apply");
  EXPECT_CONTAINS(x.fix, "without --ipc=host");
  EXPECT_EQ(level_of(f, "shm-size"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "shm-size").message, "the host's");
  EXPECT_EQ(doctor_exit_code(diagnose(f)), kDoctorExitWarn);
  // Inside a container the same namespace may also mean "not in a container at all".
  f.from_host = false;
  f.shm_is_host.reset();
  EXPECT_CONTAINS(finding(f, "ipc").message, "not in a container");
}

TEST(Doctor, OnTheHostItSaysWhereItLookedAndWhatToRunInstead) {
  // `gpu-run-ctl doctor` with no argument in a shell on the host: the host's PID and IPC namespaces.
  DoctorFacts f = plain();
  f.from_host = false;
  f.on_host = true;
  f.target = "this machine (not in a container: the host's PID and IPC namespaces)";
  f.ipc = parse_ipc_mode("host");
  f.shm_size = 24 * kGiB;
  f.shm_used = 1 * kGiB;
  f.shm_is_host.reset();
  const auto findings = diagnose(f);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].check, "where");
  EXPECT_EQ(findings[0].level, Level::kOk);
  EXPECT_CONTAINS(findings[0].message, "not in a container: it looked at the host's /dev/shm (1GiB of 24GiB used)");
  EXPECT_CONTAINS(findings[0].fix, "gpu-run-ctl doctor CONTAINER");
  EXPECT_EQ(find(findings, "ipc"), nullptr);
  EXPECT_EQ(doctor_exit_code(findings), 0);
}

// On the host: daemon.json has NVIDIA's runtime; gpu-run's entry execs `execs`.
DoctorFacts host_with_entries(const std::string& execs, const std::string& how) {
  DoctorFacts f;
  f.on_host = true;
  f.target = "this machine";
  RuntimeEntryFacts nvidia;
  nvidia.file = "/etc/docker/daemon.json";
  nvidia.engine = "docker";
  nvidia.name = "nvidia";
  nvidia.binary = "/usr/bin/nvidia-container-runtime";
  nvidia.gpu = true;
  RuntimeEntryFacts ours;
  ours.file = "/etc/docker/daemon.json";
  ours.engine = "docker";
  ours.name = "gpu-run";
  ours.gpu_run = true;
  ours.execs = execs;
  ours.execs_how = how;
  f.runtime_entries = {nvidia, ours};
  return f;
}

TEST(Doctor, OnTheHostAGpuRunEntryThatBypassesNvidiasRuntimeWarns) {
  const DoctorFacts f = host_with_entries("/usr/sbin/runc", "the gpu-run config's runtimes (runc)");
  const Finding& chain = finding(f, "runtime-chain");
  EXPECT_EQ(chain.level, Level::kWarn);
  EXPECT_CONTAINS(chain.message,
                  "/etc/docker/daemon.json's runtime \"gpu-run\" runs gpu-run-runtime, which execs "
                  "/usr/sbin/runc (the gpu-run config's runtimes (runc)), bypassing the GPU runtime "
                  "\"nvidia\" (/usr/bin/nvidia-container-runtime)");
  EXPECT_CONTAINS(chain.fix, "gpu-run-ctl configure docker --daemon-json /etc/docker/daemon.json");
  EXPECT_EQ(doctor_exit_code(diagnose(f)), kDoctorExitWarn);
}

TEST(Doctor, OnTheHostAGpuRunEntryChainingNvidiasRuntimeIsOk) {
  const DoctorFacts f =
      host_with_entries("/usr/bin/nvidia-container-runtime", "its chain file /etc/docker/gpu-run-runtime.gpu-run");
  const Finding& chain = finding(f, "runtime-chain");
  EXPECT_EQ(chain.level, Level::kOk);
  EXPECT_CONTAINS(chain.message, "gpu-run-runtime -> /usr/bin/nvidia-container-runtime");
  // Another file's GPU runtime is not this entry's business.
  DoctorFacts other = host_with_entries("/usr/sbin/runc", "the gpu-run config's runtimes (runc)");
  other.runtime_entries[0].file = "/etc/containerd/config.toml";
  EXPECT_EQ(finding(other, "runtime-chain").level, Level::kOk);
}

TEST(Doctor, OnTheHostAGpuRunEntryWhoseChainedRuntimeIsGoneFails) {
  const DoctorFacts f = host_with_entries("", "its chain file /etc/docker/gpu-run-runtime.gpu-run (runtime=/gone)");
  const Finding& chain = finding(f, "runtime-chain");
  EXPECT_EQ(chain.level, Level::kFail);
  EXPECT_CONTAINS(chain.message, "not an executable file here, so every container started through it fails");
}

TEST(Doctor, OnTheHostAStaleContainerdDropinWarnsNamingTheKey) {
  DoctorFacts f = host_with_entries("/usr/bin/nvidia-container-runtime", "its chain file");
  f.containerd_dropin = "/etc/containerd/conf.d/99-zz-gpu-run.toml";
  EXPECT_EQ(find(diagnose(f), "containerd-dropin"), nullptr);
  f.containerd_dropin_stale = "key plugins.x.containerd.runtimes.nvidia-cdi added";
  const Finding& stale = finding(f, "containerd-dropin");
  EXPECT_EQ(stale.level, Level::kWarn);
  EXPECT_CONTAINS(stale.message,
                  "/etc/containerd/conf.d/99-zz-gpu-run.toml carries a copy of containerd's CRI "
                  "section that another tool changed since (key plugins.x.containerd.runtimes."
                  "nvidia-cdi added)");
  EXPECT_CONTAINS(stale.fix, "gpu-run-ctl configure containerd");
  EXPECT_EQ(doctor_exit_code(diagnose(f)), kDoctorExitWarn);
}

TEST(Doctor, HostShmBoundInWarns) {
  DoctorFacts f = sized();
  f.shm_is_host = true;
  f.shm_size = 24 * kGiB;
  const Finding x = finding(f, "ipc");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "-v /dev/shm:/dev/shm");
  EXPECT_CONTAINS(x.fix, "remove the /dev/shm bind");
  EXPECT_EQ(level_of(f, "shm-size"), Level::kOk);
}

TEST(Doctor, ShmUseThresholds) {
  DoctorFacts f = sized();
  f.shm_size = 1000 * kMiB;
  f.shm_used = 800 * kMiB;  // exactly 80%: still OK
  EXPECT_EQ(level_of(f, "shm-use"), Level::kOk);
  f.shm_used = 810 * kMiB;
  EXPECT_EQ(level_of(f, "shm-use"), Level::kWarn);
  f.shm_used = 949 * kMiB;
  EXPECT_EQ(level_of(f, "shm-use"), Level::kWarn);
  f.shm_used = 950 * kMiB;
  EXPECT_EQ(level_of(f, "shm-use"), Level::kFail);
  EXPECT_CONTAINS(finding(f, "shm-use").message, "SIGBUS");
  f.shm_used = 1000 * kMiB;
  EXPECT_EQ(level_of(f, "shm-use"), Level::kFail);
  EXPECT_CONTAINS(finding(f, "shm-use").message, "(100%)");
}

TEST(Doctor, MemoryLimitAgainstShm) {
  DoctorFacts f = sized();
  f.shm_size = 1 * kGiB;
  f.memory_limit = 4 * kGiB;  // 25%
  EXPECT_EQ(level_of(f, "memory"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "memory").message, "25% of the memory limit 4GiB");
  f.memory_limit = 2 * kGiB;  // exactly 50%: allowed
  EXPECT_EQ(level_of(f, "memory"), Level::kOk);
  f.memory_limit = 1536 * kMiB;  // 66%
  Finding x = finding(f, "memory");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "memory_fraction_max 50%");
  EXPECT_CONTAINS(x.fix, "at least 2048m");
  f.memory_limit = 512 * kMiB;
  x = finding(f, "memory");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "larger than the memory limit");
  EXPECT_CONTAINS(x.message, "OOM-killed instead of a bus error");
  // The host's config decides the fraction.
  f.memory_limit = 1536 * kMiB;
  f.memory_fraction_max = 0.75;
  EXPECT_EQ(level_of(f, "memory"), Level::kOk);
  f.memory_limit.reset();
  EXPECT_EQ(level_of(f, "memory"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "memory").message, "no memory limit");
}

TEST(Doctor, ShmSizeRequestNotAppliedFails) {
  DoctorFacts f = plain();
  f.env = {{"GPU_RUN_SHM_SIZE", "1464m"}, {"GPU_RUN_PROFILE", "imagenet"}};
  const Finding x = finding(f, "sizing");
  EXPECT_EQ(x.level, Level::kFail);
  EXPECT_CONTAINS(x.message, "asked for 1.4GiB but /dev/shm has 64MiB");
  EXPECT_CONTAINS(x.fix, "gpu-run-runtime");
  // Bigger than asked (grow-only hook, or a larger --shm-size) is fine.
  f.shm_size = 2 * kGiB;
  EXPECT_EQ(level_of(f, "sizing"), Level::kOk);
  f.shm_size = 1464 * kMiB;
  EXPECT_EQ(level_of(f, "sizing"), Level::kOk);
  f.shm_size = 1464 * kMiB - 4096;
  EXPECT_EQ(level_of(f, "sizing"), Level::kFail);
}

TEST(Doctor, ShmSizeRequestThatIsNotASizeWarns) {
  DoctorFacts f = sized();
  f.env["GPU_RUN_SHM_SIZE"] = "lots";
  const Finding x = finding(f, "sizing");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "GPU_RUN_SHM_SIZE=lots is not a size");
}

TEST(Doctor, ShmSizeRequestWithHostShm) {
  DoctorFacts f = sized();
  f.ipc = parse_ipc_mode("host");
  f.shm_size = 24 * kGiB;
  EXPECT_EQ(level_of(f, "sizing"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "sizing").message, "never resizes it");
  f.shm_size = 1 * kGiB;
  EXPECT_EQ(level_of(f, "sizing"), Level::kFail);
}

TEST(Doctor, ProfileWithoutSizeOnADefaultShmFails) {
  DoctorFacts f = plain();
  f.env = {{"GPU_RUN_PROFILE", "imagenet"}};
  Finding x = finding(f, "sizing");
  EXPECT_EQ(x.level, Level::kFail);
  EXPECT_CONTAINS(x.message, "GPU_RUN_PROFILE=imagenet");
  EXPECT_CONTAINS(x.fix, "--runtime gpu-run");
  f.shm_size = 512 * kMiB;
  EXPECT_EQ(level_of(f, "sizing"), Level::kOk);
}

TEST(Doctor, WorkersAgainstCpus) {
  DoctorFacts f = sized();
  f.cpus = 4;
  f.env["GPU_RUN_NUM_WORKERS"] = "4";
  EXPECT_EQ(level_of(f, "workers"), Level::kOk);
  f.env["GPU_RUN_NUM_WORKERS"] = "5";
  Finding x = finding(f, "workers");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "may use 4 CPUs (affinity 8)");
  EXPECT_CONTAINS(x.fix, "without --workers");
  f.env["GPU_RUN_NUM_WORKERS"] = "four";
  EXPECT_EQ(level_of(f, "workers"), Level::kWarn);
  EXPECT_CONTAINS(finding(f, "workers").message, "not a number");
  f.env.erase("GPU_RUN_NUM_WORKERS");
  EXPECT_EQ(level_of(f, "workers"), Level::kOk);
  EXPECT_CONTAINS(finding(f, "workers").message, "not set");
  f.env["GPU_RUN_NUM_WORKERS"] = "64";
  f.cpus.reset();
  EXPECT_EQ(level_of(f, "workers"), Level::kOk) << "unknown CPUs: nothing to compare";
}

TEST(Doctor, AContainerTheRuntimeSizedIsNotCalledUnstarted) {
  // docker run --runtime gpu-run: gpu-run-runtime sized /dev/shm and set no environment.
  DoctorFacts f = plain();
  f.shm_size = 256 * kMiB;
  f.runtime = "gpu-run";
  Finding x = finding(f, "workers");
  EXPECT_EQ(x.level, Level::kOk);
  EXPECT_NOT_CONTAINS(x.message, "not started by gpu-run");
  EXPECT_CONTAINS(x.message, "the runtime gpu-run (gpu-run-runtime) sized /dev/shm and sets no environment");
  f.runtime.clear();
  f.env["GPU_RUN_PROFILE"] = "imagenet";
  EXPECT_CONTAINS(finding(f, "workers").message, "GPU_RUN_PROFILE=imagenet asked gpu-run-runtime or the hook");
  f.env.clear();
  x = finding(f, "workers");
  EXPECT_NOT_CONTAINS(x.message, "not started by gpu-run");
  EXPECT_CONTAINS(x.message, "gpu-run and the webhook set it; gpu-run-runtime and the hook size /dev/shm without it");
}

TEST(Doctor, TorchLeftoversWarnWithTheirTotal) {
  DoctorFacts f = sized();
  f.files = {{"torch_123_456_0", 3 * kMiB}, {"torch_123_456_1", 1 * kMiB}, {"sem.mp-abc", 4096}};
  const Finding x = finding(f, "torch-leftovers");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_CONTAINS(x.message, "2 torch_* segments holding 4MiB");
  EXPECT_CONTAINS(x.message, "torch_123_456_0 (3MiB)");
  EXPECT_CONTAINS(x.message, "file_system sharing strategy");
  EXPECT_CONTAINS(x.fix, "rm /dev/shm/torch_*");
  EXPECT_CONTAINS(x.fix, "file_descriptor");
  EXPECT_NOT_CONTAINS(x.message, "sem.mp-abc");
  EXPECT_EQ(doctor_exit_code(diagnose(f)), kDoctorExitWarn);
}

TEST(Doctor, ManyLeftoversAreSummarised) {
  DoctorFacts f = sized();
  for (int i = 0; i < 12; ++i) f.files.push_back({"torch_1_" + std::to_string(i), kMiB});
  const Finding x = finding(f, "torch-leftovers");
  EXPECT_CONTAINS(x.message, "12 torch_* segments holding 12MiB");
  EXPECT_CONTAINS(x.message, "and 7 more");
}

TEST(Doctor, NcclSegmentsAreListedAsOk) {
  DoctorFacts f = sized();
  f.files = {{"nccl-AbC123", 9 * kMiB}, {"nccl-xyz", 9 * kMiB}};
  const Finding x = finding(f, "nccl");
  EXPECT_EQ(x.level, Level::kOk);
  EXPECT_CONTAINS(x.message, "2 nccl-* segments holding 18MiB of /dev/shm");
  EXPECT_CONTAINS(x.message, "nccl-AbC123 (9MiB)");
  EXPECT_EQ(doctor_exit_code(diagnose(f)), 0);
  f.files.clear();
  EXPECT_CONTAINS(finding(f, "nccl").message, "no nccl-* segments");
}

TEST(Doctor, SegmentNames) {
  EXPECT_TRUE(is_torch_segment("torch_1234_5678_0"));
  EXPECT_FALSE(is_torch_segment("torch-1234"));
  EXPECT_FALSE(is_torch_segment("xtorch_1"));
  EXPECT_TRUE(is_nccl_segment("nccl-5Xk1Pq"));
  EXPECT_FALSE(is_nccl_segment("nccl_5Xk1Pq"));
}

TEST(Doctor, ShmmaxIsExplainedNotRecommended) {
  DoctorFacts f = plain();
  f.sysctls = {{"kernel.shmmax", "68719476736"}};
  const auto findings = diagnose(f);
  const Finding* x = find(findings, "shmmax");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->level, Level::kOk);
  EXPECT_CONTAINS(x->message, "kernel.shmmax=68719476736");
  EXPECT_CONTAINS(x->message, "System V shmget");
  EXPECT_CONTAINS(x->message, "whose size they do not change");
  // The worst finding is still the default size, whatever shmmax says.
  EXPECT_EQ(doctor_exit_code(findings), kDoctorExitFail);
}

TEST(Doctor, ExitCodeFollowsTheWorstFinding) {
  EXPECT_EQ(doctor_exit_code({}), 0);
  EXPECT_EQ(doctor_exit_code({{Level::kOk, "a", "", ""}}), 0);
  EXPECT_EQ(doctor_exit_code({{Level::kOk, "a", "", ""}, {Level::kWarn, "b", "", ""}}), 3);
  EXPECT_EQ(doctor_exit_code({{Level::kFail, "a", "", ""}, {Level::kWarn, "b", "", ""}}), 4);
  // Distinct from gpu-run-ctl's 1 (could not check) and 2 (wrong request).
  EXPECT_NE(kDoctorExitWarn, 1);
  EXPECT_NE(kDoctorExitWarn, 2);
  EXPECT_NE(kDoctorExitFail, 2);
}

// Issue 40: a record from before the host's memory bounded the ceiling (256 GiB, the default
// profile's max_shm, on a 24 GiB host) is shown as the guard would take it: within the host's
// memory, and within the container's budget when it has a limit.
TEST(Doctor, TheCeilingShownIsTheGuardsNeverAboveTheHostsMemory) {
  DoctorFacts f = sized();
  f.host_memory = 24 * kGiB;
  DecisionRecord r;
  r.door = "gpu-run";
  r.size = 1464 * kMiB;
  r.ceiling = 256 * kGiB;
  r.profile = "default";
  f.recorded.record = r;
  f.recorded.where = "label";
  Finding x = finding(f, "decision");
  EXPECT_CONTAINS(x.message, "the guard may grow it to 24GiB");
  EXPECT_EQ(x.message.find("256GiB"), std::string::npos) << x.message;
  f.memory_limit = 8 * kGiB;
  x = finding(f, "decision");
  EXPECT_CONTAINS(x.message, "the guard may grow it to 4GiB");
}

TEST(Doctor, TextReport) {
  const DoctorFacts f = plain();
  const std::string text = format_findings(f.target, diagnose(f));
  EXPECT_CONTAINS(text, "gpu-run-ctl doctor: container t1 (3f2a9c1b0e4d, docker)\n");
  EXPECT_CONTAINS(text, "FAIL  shm-size");
  EXPECT_CONTAINS(text, "fix: restart the container");
  EXPECT_CONTAINS(text, "OK    ipc");
  EXPECT_CONTAINS(text, "worst: FAIL\n");
  // OK findings carry no fix line.
  const std::string ok = format_findings(sized().target, diagnose(sized()));
  EXPECT_NOT_CONTAINS(ok, "fix:");
  EXPECT_CONTAINS(ok, "worst: OK\n");
}

TEST(Doctor, ColoursTheLevelsOnlyWhenAsked) {
  const DoctorFacts f = plain();
  const std::vector<Finding> findings = diagnose(f);
  const std::string text = format_findings(f.target, findings, true);
  EXPECT_CONTAINS(text, "\033[1;31mFAIL\033[0m  shm-size");
  EXPECT_CONTAINS(text, "\033[32mOK\033[0m    ipc");
  EXPECT_CONTAINS(text, "worst: \033[1;31mFAIL\033[0m\n");
  EXPECT_NOT_CONTAINS(format_findings(f.target, findings), "\033");
  // Without its escapes the coloured report is the plain one, column for column.
  std::string stripped;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      i = text.find('m', i);
      continue;
    }
    stripped += text[i];
  }
  EXPECT_EQ(stripped, format_findings(f.target, findings));
  DoctorFacts warn = sized();
  warn.ipc = parse_ipc_mode("host");
  EXPECT_CONTAINS(format_findings(warn.target, diagnose(warn), true), "\033[1;33mWARN\033[0m  ");
}

TEST(Doctor, ColorAutoIsATerminalWithoutNoColor) {
  using Env = std::map<std::string, std::string>;
  const auto env = [](Env vars) {
    return [vars](const std::string& k) -> std::optional<std::string> {
      auto it = vars.find(k);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  };
  EXPECT_TRUE(use_color("auto", true, env({{"TERM", "xterm-256color"}})));
  EXPECT_FALSE(use_color("auto", false, env({{"TERM", "xterm-256color"}})));
  EXPECT_FALSE(use_color("auto", true, env({{"TERM", "dumb"}})));
  EXPECT_FALSE(use_color("auto", true, env({})));
  EXPECT_FALSE(use_color("auto", true, env({{"TERM", "xterm"}, {"NO_COLOR", "1"}})));
  EXPECT_TRUE(use_color("auto", true, env({{"TERM", "xterm"}, {"NO_COLOR", ""}})));  // set but empty: ignored
  EXPECT_TRUE(use_color("always", false, env({{"NO_COLOR", "1"}})));                 // the flag wins
  EXPECT_FALSE(use_color("never", true, env({{"TERM", "xterm"}})));
  EXPECT_EQ(expect_error([&] { use_color("yes", true, env({})); }).exit_code(), kExitUsage);
}

TEST(Doctor, JsonReport) {
  DoctorFacts f = plain();
  f.files = {{"torch_9_9", kMiB}};
  const nlohmann::json j = doctor_json(f, diagnose(f));
  EXPECT_EQ(j["worst"], "FAIL");
  EXPECT_EQ(j["exit_code"], kDoctorExitFail);
  EXPECT_EQ(j["target"], f.target);
  EXPECT_EQ(j["facts"]["shm_size_bytes"], 64 * kMiB);
  EXPECT_EQ(j["facts"]["shm_mount"], "tmpfs");
  EXPECT_EQ(j["facts"]["ipc_mode"], "private");
  EXPECT_TRUE(j["facts"]["memory_limit_bytes"].is_null());
  EXPECT_EQ(j["facts"]["files"][0]["name"], "torch_9_9");
  ASSERT_TRUE(j["findings"].is_array());
  bool saw_fail = false;
  for (const auto& x : j["findings"]) {
    EXPECT_TRUE(x.contains("level") && x.contains("check") && x.contains("message") && x.contains("fix"));
    if (x["check"] == "shm-size") {
      EXPECT_EQ(x["level"], "FAIL");
      EXPECT_TRUE(x["fix"].is_string());
      saw_fail = true;
    }
  }
  EXPECT_TRUE(saw_fail);
}

// The workers gpu-run planned under either name, and the command line's against the plan as the
// door that sized the container recorded it (its record's command_flag): named by doctor.
TEST(Doctor, TheRecordedCommandLinesWorkersAgainstThePlan) {
  DoctorFacts f = sized();
  f.cpus = 4;
  f.env.erase("GPU_RUN_NUM_WORKERS");
  f.env["GPU_RUN_WORKERS"] = "5";
  EXPECT_EQ(level_of(f, "workers"), Level::kWarn) << "GPU_RUN_WORKERS read as its alias is";
  DecisionRecord r;
  r.door = "gpu-run-runtime";
  r.size = 256 * kMiB;
  r.workers = 1;
  r.command_flag = "-j 4";
  r.command_workers = 4;
  f.recorded.record = r;
  const Finding x = finding(f, "workers");
  EXPECT_EQ(x.level, Level::kWarn);
  EXPECT_EQ(x.message,
            "the command line's '-j 4' starts 4 DataLoader workers, but gpu-run-runtime planned /dev/shm (256MiB) for "
            "1 (its record, gpu-run.decision)");
  EXPECT_CONTAINS(x.fix, "start it with -e GPU_RUN_WORKERS=4");
  f.recorded.record->command_workers = 1;
  f.recorded.record->command_flag = "-j 1";
  EXPECT_NOT_CONTAINS(finding(f, "workers").message, "command line");
}

// The traps at doctor: exit 137 without the OOM killer is not an OOM kill, and a crash
// of a plan for fewer workers than the command line started says so first.
TEST(Doctor, ASigkillFromOutsideIsNotAnOomKill) {
  CrashFacts f;
  f.exit_code = 137;
  f.oom_killed = false;
  std::vector<Finding> findings = diagnose_crash(f);
  EXPECT_EQ(find(findings, "oom-killed"), nullptr);
  ASSERT_NE(find(findings, "killed"), nullptr);
  EXPECT_CONTAINS(find(findings, "killed")->message, "SIGKILL from outside");
  EXPECT_NOT_CONTAINS(find(findings, "killed")->fix, "memory limit");
  f.oom_killed = true;
  EXPECT_NE(find(diagnose_crash(f), "oom-killed"), nullptr);
  f.oom_killed.reset();  // a log alone: the exit status is all there is
  EXPECT_NE(find(diagnose_crash(f), "oom-killed"), nullptr);
}

TEST(Doctor, ACrashOfAPlanForFewerWorkersThanTheCommandLineNamesThatFirst) {
  CrashFacts f;
  f.exit_code = 1;
  read_crash_log(
      "RuntimeError: DataLoader worker (pid 42) is killed by signal: Bus error. It is possible that "
      "dataloader's workers are out of shared memory.\n",
      f);
  f.profile = "imagenet";
  f.workers = "1";
  f.planned_shm = 256 * kMiB;
  std::vector<Finding> findings = diagnose_crash(f);
  ASSERT_FALSE(findings.empty());
  put_workers_mismatch_first(f, findings);
  EXPECT_NE(findings[0].check, "workers-mismatch") << "no command line known: nothing to say";
  f.command_flag = "-j 4";
  f.command_workers = 4;
  f.door_name = "gpu-run";
  put_workers_mismatch_first(f, findings);
  ASSERT_EQ(findings[0].check, "workers-mismatch");
  EXPECT_EQ(findings[0].level, Level::kFail);
  EXPECT_CONTAINS(findings[0].message,
                  "the command line's '-j 4' started 4 DataLoader workers, but /dev/shm (256MiB) "
                  "was planned for 1");
  EXPECT_CONTAINS(findings[0].fix, "rerun with gpu-run --workers 4");
}

}  // namespace
}  // namespace gpurun
