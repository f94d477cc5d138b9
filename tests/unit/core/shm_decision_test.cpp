#include "decision/shm_decision.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "base/error.hpp"
#include "base/temp_dir.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "decision/growth_limits.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

std::string error_text(const ShmDecision& d) { return d.error ? d.error->what() : ""; }

class ShmDecisionTest : public ::testing::Test {
 protected:
  ProfileStore store_{{GPU_RUN_SOURCE_PROFILES}};
  Config config_;
  HostFacts host_{2, 0, 24 * kGiB};

  SpecFacts spec_with_env(std::map<std::string, std::string> env) {
    SpecFacts s;
    s.env = std::move(env);
    s.has_ipc_namespace = true;
    return s;
  }
  ShmDecision decide(const SpecFacts& spec, std::map<std::string, std::string> state_annotations = {}) {
    return decide_shm(container_request(state_annotations, spec), spec, config_, store_, host_);
  }
};

TEST_F(ShmDecisionTest, NothingNamedAndNoDefaultLeavesAlone) {
  ShmDecision d = decide(spec_with_env({{"PATH", "/bin"}}));
  EXPECT_FALSE(d.act);
  EXPECT_FALSE(d.explicit_request);
  EXPECT_TRUE(!d.error);
}

TEST_F(ShmDecisionTest, DefaultProfileApplies) {
  config_.default_profile = "mnist";
  ShmDecision d = decide(spec_with_env({}));
  EXPECT_TRUE(d.act);
  EXPECT_FALSE(d.explicit_request);
  EXPECT_EQ(d.source, "default");
  EXPECT_EQ(d.profile, "mnist");
  // mnist: 1 worker, tiny batches -> min_shm 128m.
  EXPECT_EQ(d.size, 128 * kMiB);
}

TEST_F(ShmDecisionTest, AnnotationsWinOverEnvAndStateOverSpec) {
  SpecFacts spec = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}});
  spec.annotations["gpu-run.profile"] = "cifar";
  ContainerRequest r = container_request({}, spec);
  EXPECT_EQ(r.profile, "cifar");
  EXPECT_EQ(r.source, "annotation");
  r = container_request({{"gpu-run.profile", "medical"}}, spec);
  EXPECT_EQ(r.profile, "medical");
  spec.env["GPU_RUN_GPUS"] = "2";
  r = container_request({}, spec);
  EXPECT_EQ(r.source, "annotation+env");
}

TEST_F(ShmDecisionTest, ImagenetTwoGpusMatchesTheModel) {
  ShmDecision d = decide(spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_GPUS", "2"}}));
  ASSERT_TRUE(d.act) << error_text(d);
  // 2 CPUs / 2 ranks -> 1 worker. batch = pageup(64*3*224*224*4) + pageup(64*8) = 38535168 + 4096.
  // pin_memory on 2 GPUs -> hold 0: per_rank = (2*1+0) * 38539264 + 4096*(8+5) = 77131776;
  // NCCL's SHM segments: 2 ranks x 2 channels x 1 peer x (9637888 + 4096) = 38567936;
  // 2*77131776 + 38567936 = 192831488 -> 184 MiB, raised to imagenet's min_shm 256 MiB.
  EXPECT_EQ(d.size, 256 * kMiB);
  EXPECT_EQ(d.workers, 1u);
  EXPECT_EQ(d.gpus, 2u);
}

TEST_F(ShmDecisionTest, GpusFromNvidiaVisibleDevicesAndDevices) {
  ShmDecision d = decide(spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"NVIDIA_VISIBLE_DEVICES", "0,1,2"}}));
  EXPECT_EQ(d.gpus, 3u);
  d = decide(spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"NVIDIA_VISIBLE_DEVICES", "none"}}));
  EXPECT_EQ(d.gpus, 0u);
  SpecFacts spec = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"NVIDIA_VISIBLE_DEVICES", "all"}});
  spec.gpu_devices = 4;
  EXPECT_EQ(decide(spec).gpus, 4u);
  spec = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}});
  spec.gpu_devices = 2;
  EXPECT_EQ(decide(spec).gpus, 2u);
}

TEST_F(ShmDecisionTest, PinnedLoaderIsPlannedUnpinnedOnANodeWithoutGpus) {
  // imagenet pins; 2 GPUs asked for. Where no GPU can reach the container PyTorch does not pin:
  // hold 3 (loader_hold, and the last batch of a pass); where one is in the spec, or the door cannot
  // tell, hold 0.
  const SpecFacts asked = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_GPUS", "2"}});
  ShmDecision d = decide(asked);  // host_ was not counted on the node (as in the webhook): unknown
  ASSERT_TRUE(d.plan) << error_text(d);
  EXPECT_EQ(d.plan->hold, 0u);
  EXPECT_NE(d.plan->hold_why.find("assumed to reach the container"), std::string::npos);
  host_.gpus_counted = true;  // the hook on a node without /dev/nvidiaN
  d = decide(asked);
  ASSERT_TRUE(d.plan) << error_text(d);
  EXPECT_EQ(d.plan->hold, 3u);
  EXPECT_NE(d.plan->hold_why.find("(no /dev/nvidiaN on this host)"), std::string::npos);
  SpecFacts with_device = asked;
  with_device.gpu_devices = 2;
  d = decide(with_device);
  ASSERT_TRUE(d.plan) << error_text(d);
  EXPECT_EQ(d.plan->hold, 0u);
  EXPECT_NE(d.plan->hold_why.find("a GPU device in the container's spec"), std::string::npos);
}

TEST_F(ShmDecisionTest, ExplicitSize) {
  ShmDecision d = decide(spec_with_env({{"GPU_RUN_SHM_SIZE", "2g"}}));
  EXPECT_TRUE(d.act);
  EXPECT_TRUE(d.size_explicit);
  EXPECT_EQ(d.size, 2 * kGiB);
  SpecFacts spec = spec_with_env({});
  spec.annotations["io.kubernetes.cri-o.ShmSize"] = "300m";
  EXPECT_EQ(decide(spec).size, 300 * kMiB);
}

// An unreadable profile file keeps its errno and its exit code (a usage error, docs/reference.md)
// from the store that read it to the decision a door reports: a link to itself (ELOOP) and a
// directory where the file should be (EISDIR).
TEST_F(ShmDecisionTest, AnUnreadableProfileKeepsItsErrnoAndExitCode) {
  TempDir dir;
  fs::create_symlink("loop.json", dir / "loop.json");
  fs::create_directory(dir / "folder.json");
  store_ = ProfileStore({dir.path()});
  for (const auto& [name, err] : {std::pair<const char*, int>{"loop", ELOOP}, {"folder", EISDIR}}) {
    const ShmDecision d = decide(spec_with_env({{"GPU_RUN_PROFILE", name}}));
    ASSERT_TRUE(d.error) << name;
    EXPECT_FALSE(d.act);
    EXPECT_EQ(d.error->errno_value(), err) << error_text(d);
    EXPECT_EQ(d.error->exit_code(), kExitUsage) << error_text(d);
    EXPECT_CONTAINS(error_text(d), (dir / (std::string(name) + ".json")).string());
  }
  const ShmDecision d = decide(spec_with_env({{"GPU_RUN_PROFILE", "loop"}}));
  EXPECT_CONTAINS(error_text(d), std::strerror(ELOOP));
}

TEST_F(ShmDecisionTest, BadInputsAreErrorsNotThrows) {
  struct Case {
    const char* key;
    std::string value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"gpu-run.shm-size", "99999999t", "too large"},
      {"gpu-run.shm-size", "-1g", "negative"},
      {"gpu-run.shm-size", "100k", "below 1MiB"},
      {"gpu-run.shm-size", "1t", "more than this host's memory"},
      {"gpu-run.profile", "../../etc/passwd", "not a valid profile name"},
      {"gpu-run.profile", "/tmp/x.json", "not a valid profile name"},
      {"gpu-run.profile", std::string("imagenet\0x", 10), "not a valid profile name"},
      {"gpu-run.profile", std::string(5000, 'a'), "too long"},
      {"gpu-run.profile", "imagenett", "did you mean imagenet"},
      {"gpu-run.gpus", "2x", "invalid number"},
      {"gpu-run.workers", "-3", "negative"},
      {"gpu-run.batch-size", "0", "at least 1"},
  };
  for (const Case& c : cases) {
    ShmDecision d = decide(spec_with_env({}), {{c.key, c.value}});
    EXPECT_FALSE(d.act) << c.key << "=" << c.value.substr(0, 20);
    EXPECT_TRUE(d.explicit_request);
    EXPECT_NE(error_text(d).find(c.expect), std::string::npos) << c.key << ": " << error_text(d);
  }
}

TEST_F(ShmDecisionTest, MemoryLimitBoundsThePlanAndExplicitSizes) {
  SpecFacts spec = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_GPUS", "2"}});
  spec.memory_limit = 384 * kMiB;  // at most 192 MiB of shm; the plan is 256 MiB
  ShmDecision d = decide(spec);
  EXPECT_FALSE(d.act);
  EXPECT_NE(error_text(d).find("does not fit the memory limit"), std::string::npos) << error_text(d);
  spec = spec_with_env({{"GPU_RUN_SHM_SIZE", "400m"}});
  spec.memory_limit = 512 * kMiB;
  d = decide(spec);
  EXPECT_NE(error_text(d).find("memory limit"), std::string::npos) << error_text(d);
  spec.memory_limit = 1 * kGiB;
  EXPECT_TRUE(decide(spec).act);
}

TEST_F(ShmDecisionTest, PodMemoryLimitIsTheBudgetWhenTheSpecHasNone) {
  SpecFacts spec = spec_with_env({{"GPU_RUN_SHM_SIZE", "600m"}});
  spec.pod_memory_limit = 1 * kGiB;  // at most 512 MiB of shm
  ShmDecision d = decide(spec);
  EXPECT_FALSE(d.act);
  EXPECT_NE(error_text(d).find("does not fit the memory limit 1GiB"), std::string::npos) << error_text(d);
  EXPECT_NE(error_text(d).find("raise the pod's memory limit to at least"), std::string::npos) << error_text(d);
  spec = spec_with_env({{"GPU_RUN_SHM_SIZE", "500m"}});
  spec.pod_memory_limit = 1 * kGiB;
  EXPECT_TRUE(decide(spec).act);
  // The container's own limit, when it has one, is the budget.
  spec = spec_with_env({{"GPU_RUN_SHM_SIZE", "600m"}});
  spec.pod_memory_limit = 1 * kGiB;
  spec.memory_limit = 2 * kGiB;
  EXPECT_TRUE(decide(spec).act);
}

TEST_F(ShmDecisionTest, CpusOfTheContainerDriveAutoWorkers) {
  host_.cpus = 16;
  SpecFacts spec = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}});
  spec.cpu_quota = 4.0;
  EXPECT_EQ(decide(spec).workers, 4u);
  spec.cpu_quota.reset();
  spec.cpuset_cpus = 6;
  EXPECT_EQ(decide(spec).workers, 6u);
  spec.cpuset_cpus.reset();
  EXPECT_EQ(decide(spec).workers, 12u);  // bounded by batch_size/8+4 = 12
}

TEST_F(ShmDecisionTest, DescribeIsOneLine) {
  ShmDecision d = decide(spec_with_env({}), {{"gpu-run.profile", "bad\nname"}});
  std::string line = describe(d);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("error="), std::string::npos);
}

TEST_F(ShmDecisionTest, PodAppContainerGrowsThePodsShmButNeverShrinksIt) {
  SpecFacts spec = spec_with_env({});
  spec.annotations = {{"gpu-run.shm-size", "2g"}, {"io.kubernetes.cri.container-type", "container"}};
  ShmDecision d = decide(spec);
  ASSERT_TRUE(d.act) << error_text(d);
  EXPECT_EQ(d.size, 2 * kGiB);
  EXPECT_FALSE(d.size_explicit);
  EXPECT_NE(d.reason.find("grow only"), std::string::npos) << d.reason;
  spec.annotations["io.kubernetes.cri.container-type"] = "sandbox";  // the pod's sandbox sizes it exactly
  EXPECT_TRUE(decide(spec).size_explicit);
}

TEST_F(ShmDecisionTest, ShmBoundFromTheHostsIsLeftAlone) {
  // containerd's app container of a hostIPC pod: it joins the sandbox's ipc namespace (the
  // host's) by path and bind-mounts the host's /dev/shm.
  SpecFacts spec = spec_with_env({});
  spec.ipc_namespace_path = true;
  spec.shm_type = SpecShmType::kBind;
  spec.shm_source = "/dev//shm/";
  spec.annotations = {{"gpu-run.shm-size", "2g"}};
  ShmDecision d = decide(spec);
  EXPECT_FALSE(d.act);
  EXPECT_TRUE(d.host_ipc);
  EXPECT_NE(d.reason.find("bind-mounted from the host (/dev//shm/)"), std::string::npos) << d.reason;
  spec.shm_source = "/run";  // a hostPath volume at /dev/shm: the host's tmpfs, never resized
  EXPECT_TRUE(decide(spec).host_ipc);
  spec.shm_source = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm";  // the pod's own tmpfs
  EXPECT_TRUE(decide(spec).act);
}

// The one adapter names a key as the door that read it does (its RequestWords): a person's flag,
// a container's key, a pod's annotation.
TEST_F(ShmDecisionTest, OneAdapterNamesTheKeyAsTheDoorReadIt) {
  RequestWords flag_words = kContainerWords;
  flag_words.workers = "--workers";
  flag_words.gpus = "--gpus";
  ContainerRequest r;
  r.workers = "many";
  SpecFacts spec = spec_with_env({});
  EXPECT_THROW(
      {
        try {
          sizing_request(r, spec, host_, config_);
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()), "workers: invalid number 'many': expected a whole number");
          throw;
        }
      },
      Error);
  r.origin = RequestOrigin::kFlags;
  r.words = &flag_words;
  try {
    sizing_request(r, spec, host_, config_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--workers: invalid number 'many': expected a whole number");
  }
  RequestWords pod_words = kContainerWords;
  pod_words.workers = "gpu-run.workers";
  r.origin = RequestOrigin::kContainer;
  r.words = &pod_words;
  try {
    sizing_request(r, spec, host_, config_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "gpu-run.workers: invalid number 'many': expected a whole number");
  }
  r.origin = RequestOrigin::kFlags;
  r.words = &flag_words;
  // Docker's --gpus syntax for flags, a count for a container.
  r.workers.reset();
  r.gpus = "device=0,1";
  EXPECT_EQ(sizing_request(r, spec, host_, config_).gpus, 2u);
  r.origin = RequestOrigin::kContainer;
  EXPECT_THROW(sizing_request(r, spec, host_, config_), Error);
  // CPUs: the host's, bounded by the cpuset and the quota; the budget's limit: the container's, else the pod's.
  r.gpus.reset();
  spec.cpuset_cpus = 1;
  EXPECT_EQ(sizing_request(r, spec, HostFacts{8, 0, 0}, config_).cpus, 1u);
  spec.cpuset_cpus.reset();
  spec.cpu_quota = 2.5;
  EXPECT_EQ(sizing_request(r, spec, HostFacts{8, 0, 0}, config_).cpus, 3u);
  spec.pod_memory_limit = kGiB;
  EXPECT_EQ(sizing_request(r, spec, host_, config_).memory_limit, kGiB);
  spec.memory_limit = 2 * kGiB;
  EXPECT_EQ(sizing_request(r, spec, host_, config_).memory_limit, 2 * kGiB);
}

// An explicit size over the memory budget gets the same answer whichever door read it.
TEST_F(ShmDecisionTest, AnExplicitSizeOverTheBudgetIsRefusedAtEveryDoor) {
  SpecFacts spec = spec_with_env({});
  spec.memory_limit = kGiB;  // at most 512 MiB of /dev/shm
  ContainerRequest from_container;
  from_container.shm_size = "600m";
  from_container.source = "annotation";
  ContainerRequest from_flags = from_container;
  from_flags.origin = RequestOrigin::kFlags;
  const ShmDecision c = decide_shm(from_container, spec, config_, store_, host_);
  const ShmDecision f = decide_shm(from_flags, spec, config_, store_, host_);
  EXPECT_FALSE(c.act);
  EXPECT_FALSE(f.act);
  EXPECT_CONTAINS(error_text(c), "shm-size 600MiB does not fit the memory limit 1GiB");
  EXPECT_CONTAINS(error_text(c), "raise the memory limit to at least 1200m or ask for less");
  // One refusal, worded in the words the request carries (here none given: the contract's).
  ASSERT_TRUE(c.refusal && f.refusal);
  EXPECT_EQ(c.refusal->kind, RefusalKind::kOverBudget);
  EXPECT_FALSE(c.refusal->planned);
  EXPECT_EQ(c.refusal->size, 600 * kMiB);
  EXPECT_EQ(f.refusal->memory_limit, c.refusal->memory_limit);
  EXPECT_EQ(error_text(f), error_text(c));
  from_container.shm_size = "500m";
  const ShmDecision ok = decide_shm(from_container, spec, config_, store_, host_);
  EXPECT_TRUE(ok.act) << error_text(ok);
  EXPECT_EQ(ok.size, 500 * kMiB);
  EXPECT_FALSE(ok.planned);
  ASSERT_TRUE(ok.plan);  // the default profile's plan, beside the size
  EXPECT_EQ(ok.plan->profile, "default");
}

// The host's /dev/shm is left alone whatever the request says, even a malformed one, and the
// plan is still there for a door that shows it.
TEST_F(ShmDecisionTest, HostShmIsLeftAloneEvenForABadRequest) {
  SpecFacts spec = spec_with_env({{"GPU_RUN_PROFILE", "imagenet"}, {"GPU_RUN_WORKERS", "x"}});
  spec.has_ipc_namespace = false;
  ShmDecision d = decide(spec);
  EXPECT_TRUE(d.host_ipc);
  EXPECT_FALSE(d.act);
  EXPECT_TRUE(!d.error) << error_text(d);
  spec.env.erase("GPU_RUN_WORKERS");
  d = decide(spec);
  EXPECT_TRUE(d.host_ipc);
  ASSERT_TRUE(d.plan);
  EXPECT_EQ(d.plan->profile, "imagenet");
  // A person's gpu-run with no flag is a request: a default applies.
  ContainerRequest flags;
  flags.origin = RequestOrigin::kFlags;
  spec.has_ipc_namespace = true;
  d = decide_shm(flags, spec, config_, store_, host_);
  EXPECT_TRUE(d.explicit_request);
  EXPECT_TRUE(d.act) << error_text(d);
  EXPECT_TRUE(d.planned);
  EXPECT_EQ(d.profile, "default");
}

// What gpu-run recorded in a container (container_env, container_labels) reads back as the request.
TEST_F(ShmDecisionTest, RecordedRequestReadsWhatGpuRunWrote) {
  std::map<std::string, std::string> env, labels;
  for (const auto& [k, v] : container_env("imagenet", 2, 3, 64, 512 * kMiB)) env[k] = v;
  for (const auto& [k, v] : container_labels("imagenet", 2, 512 * kMiB)) labels[k] = v;
  ContainerRequest r = recorded_request(env, labels);
  EXPECT_EQ(r.profile, "imagenet");
  EXPECT_EQ(r.gpus, "2");
  EXPECT_EQ(r.workers, "3");
  EXPECT_EQ(r.batch_size, "64");
  EXPECT_FALSE(r.shm_size);  // a recorded size is what was applied, not a request
  // The environment wins over a label; a label alone counts.
  r = recorded_request({{"GPU_RUN_PROFILE", "b"}}, {{"gpu-run.profile", "a"}, {"gpu-run.gpus", "8"}});
  EXPECT_EQ(r.profile, "b");
  EXPECT_EQ(r.gpus, "8");
  // Workers under the request's name alone (GPU_RUN_NUM_WORKERS is the older name, read first).
  EXPECT_EQ(recorded_request({{"GPU_RUN_WORKERS", "5"}}, {}).workers, "5");
  EXPECT_EQ(recorded_request({{"GPU_RUN_WORKERS", "5"}, {"GPU_RUN_NUM_WORKERS", "6"}}, {}).workers, "6");
  const SizingRequest sr = sizing_request(recorded_request(env, labels), spec_with_env({}), host_, config_);
  EXPECT_EQ(sr.gpus, 2u);
  EXPECT_EQ(sr.workers, 3u);
  EXPECT_EQ(sr.batch_size, 64u);
}

// Issue 40: on a 24 GiB host without --memory the record said the guard may grow /dev/shm to
// 256 GiB (the default profile's max_shm), more than the host has.
TEST_F(ShmDecisionTest, TheRecordedCeilingIsNeverAboveTheHostsMemory) {
  ShmDecision d = decide(spec_with_env({{"GPU_RUN_PROFILE", "default"}}));
  ASSERT_TRUE(d.act) << error_text(d);
  ASSERT_TRUE(d.plan);
  ASSERT_GT(d.plan->max_shm, 24 * kGiB);  // the trap needs a max_shm above the host
  EXPECT_EQ(decision_record(d, "gpu-run").ceiling, 24 * kGiB);
  EXPECT_EQ(growth_ceiling(guard_limits(*d.plan), d.size), 24 * kGiB);
  // A memory limit's budget stays the smaller.
  SpecFacts limited = spec_with_env({{"GPU_RUN_PROFILE", "default"}});
  limited.memory_limit = 8 * kGiB;
  d = decide(limited);
  ASSERT_TRUE(d.act) << error_text(d);
  EXPECT_EQ(decision_record(d, "gpu-run").ceiling, 4 * kGiB);
}

}  // namespace
}  // namespace gpurun
