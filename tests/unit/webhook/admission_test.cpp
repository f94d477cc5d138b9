#include "webhook/admission.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "base/k8s_quantity.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "profiles/profile_store.hpp"
#include "serve/profile_cache.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

// A profile whose sizes are worked out by hand: 4 samples of 1 MiB per batch (4 MiB, page
// aligned), 2 workers per GPU, prefetch 2, pin_memory, headroom 1.0, NCCL reserve 64 MiB (flat).
// Each loader adds its semaphore pages, 4096 * (8 + 5 * workers) = 72 KiB with 2 workers.
//   per_rank(gpus > 0) = (2 * 2 + 0) * 4 MiB + 72 KiB = 16 MiB + 72 KiB   (hold 0: pin thread)
//   per_rank(gpus = 0) = (2 * 2 + 2) * 4 MiB + 72 KiB = 24 MiB + 72 KiB   (hold 2: no pin thread without CUDA)
//   shm(8 GPUs) = 8 * 16 MiB + 576 KiB + 64 MiB -> 193 MiB; shm(2) = 32 MiB + 144 KiB + 64 MiB -> 97 MiB;
//   shm(1) -> 17 MiB; shm(0) -> 25 MiB (MiB-rounded up)
// (cross-checked: gpu-run-ctl plan --profile-dir DIR --profile webtest --gpus 8 -> 193m).
constexpr const char* kWebtest = R"({
  "name": "webtest", "extends": null,
  "fields": [{"name": "x", "shape": [1048576], "dtype": "uint8"}],
  "batch_size": 4, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true,
  "headroom": 1.0, "nccl_reserve": "64m", "min_shm": "1m", "max_shm": "1g"})";

// The same with workers from the CPUs: max(1, cpus / ranks), bounded by 4 / 8 + 4 = 4.
constexpr const char* kWebauto = R"({
  "name": "webauto", "extends": "webtest", "workers_per_gpu": "auto"})";

// The same with max_shm 100 MiB: 8 GPUs (193 MiB) are refused.
constexpr const char* kWebsmall = R"({
  "name": "websmall", "extends": "webtest", "max_shm": "100m"})";

class ReviewTest : public ::testing::Test {
 protected:
  ReviewTest() {
    dir_.write("webtest.json", kWebtest);
    dir_.write("webauto.json", kWebauto);
    dir_.write("websmall.json", kWebsmall);
  }

  ProfileStore store() const { return ProfileStore({dir_.path(), builtin_profile_dir(test::builtin_only_env)}); }

  static json review_of(const json& pod, const std::string& uid = "uid-1") {
    return {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", uid},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
              {"namespace", "ml"},
              {"operation", "CREATE"},
              {"object", pod}}}};
  }

  ReviewResult run(const json& review) const { return review_admission(review.dump(), config_, store()); }

  static std::string decode64(const std::string& in) {
    const std::string abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    unsigned v = 0;
    int bits = 0;
    for (char c : in) {
      if (c == '=') break;
      v = (v << 6) | static_cast<unsigned>(abc.find(c));
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out += static_cast<char>((v >> bits) & 0xff);
      }
    }
    return out;
  }

  // The pod after the review's patch (the pod itself when there is none).
  static json patched(const json& pod, const ReviewResult& r) {
    const json& resp = r.review.at("response");
    if (!resp.contains("patch")) return pod;
    EXPECT_EQ(resp.at("patchType"), "JSONPatch");
    return pod.patch(json::parse(decode64(resp.at("patch").get<std::string>())));
  }

  static std::string env_of(const json& c, const std::string& name) {
    for (const json& e : c.value("env", json::array()))
      if (e.value("name", "") == name) return e.value("value", "");
    return "";
  }

  // The emptyDir's sizeLimit: the ceiling the node guard may grow /dev/shm to.
  static std::string size_limit(const json& pod) {
    for (const json& v : pod["spec"].value("volumes", json::array()))
      if (v.contains("emptyDir") && v["emptyDir"].value("medium", "") == "Memory")
        return v["emptyDir"].value("sizeLimit", "");
    return "";
  }

  // The plan: the /dev/shm size every container that mounts it is told (GPU_RUN_SHM_SIZE), as a
  // Kubernetes quantity; "" when they disagree or none mounts it.
  static std::string shm_volume_size(const json& pod) {
    std::string size;
    for (const json& c : pod["spec"].value("containers", json::array())) {
      if (!mounts_shm(c)) continue;
      const std::string mine = k8s_quantity(parse_size(env_of(c, "GPU_RUN_SHM_SIZE")));
      if (!size.empty() && mine != size) return "";
      size = mine;
    }
    return size;
  }

  static bool mounts_shm(const json& c) {
    for (const json& m : c.value("volumeMounts", json::array()))
      if (m.value("mountPath", "") == "/dev/shm") return true;
    return false;
  }

  static json container(const std::string& name, const json& limits = json::object(),
                        const json& requests = json::object()) {
    json c = {{"name", name}, {"image", "pytorch/pytorch"}};
    if (!limits.empty() || !requests.empty()) c["resources"] = json::object();
    if (!limits.empty()) c["resources"]["limits"] = limits;
    if (!requests.empty()) c["resources"]["requests"] = requests;
    return c;
  }

  // `containers`: an array, or one container (a braced single element is that element).
  static json pod(const json& annotations, const json& containers) {
    const json cs = containers.is_array() ? containers : json::array({containers});
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"annotations", annotations}}},
            {"spec", {{"containers", cs}}}};
  }

  test::TempDir dir_;
  WebhookConfig config_;
};

TEST_F(ReviewTest, PyTorchJobDdpWorkerWithEightGpus) {
  // 8 GPUs, 2 workers each: 8 * ((2*2+0) * 4 MiB + 72 KiB) + 64 MiB NCCL -> 193 MiB. The memory
  // limit 64Gi and request 32Gi are raised by 193Mi: 65729Mi and 32961Mi.
  json p = pod({{"gpu-run.profile", "webtest"}},
               {container("pytorch", {{"nvidia.com/gpu", "8"}, {"memory", "64Gi"}, {"cpu", "32"}},
                          {{"nvidia.com/gpu", "8"}, {"memory", "32Gi"}})});
  p["spec"]["containers"][0]["env"] = json::array({{{"name", "MASTER_ADDR"}, {"value", "job-master-0"}}});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(r.review["response"]["uid"], "uid-1");
  EXPECT_EQ(r.review["response"]["allowed"], true);
  EXPECT_EQ(r.review["apiVersion"], "admission.k8s.io/v1");
  const json out = patched(p, r);
  EXPECT_EQ(shm_volume_size(out), "193Mi");
  const json& c = out["spec"]["containers"][0];
  EXPECT_TRUE(mounts_shm(c));
  EXPECT_EQ(c["resources"]["limits"]["memory"], "65729Mi");
  EXPECT_EQ(c["resources"]["requests"]["memory"], "32961Mi");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(env_of(c, "MASTER_ADDR"), "job-master-0");
  EXPECT_EQ(env_of(c, "GPU_RUN_PROFILE"), "webtest");
  EXPECT_EQ(env_of(c, "GPU_RUN_NUM_WORKERS"), "2");
  EXPECT_EQ(env_of(c, "GPU_RUN_BATCH_SIZE"), "4");
  EXPECT_EQ(env_of(c, "GPU_RUN_SHM_SIZE"), "193m");
  EXPECT_CONTAINS(r.fields, "outcome=patched");
  EXPECT_CONTAINS(r.fields, "size=193Mi");
}

TEST_F(ReviewTest, SizeLimitIsTheCeilingTheGuardMayGrowTo) {
  // The kubelet mounts the emptyDir at its sizeLimit and evicts a pod past it: the webhook writes
  // the guard's ceiling there (growth_ceiling), and the plan in GPU_RUN_SHM_SIZE for the guard
  // to lower it to. DDP (above): max_shm 1 GiB is below half the raised 65729Mi.
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("pytorch", {{"nvidia.com/gpu", "8"}, {"memory", "64Gi"}})});
  json out = patched(p, run(review_of(p)));
  EXPECT_EQ(size_limit(out), "1Gi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_LIMIT"), "1024m");
  // A limit of 256Mi raised to 256 + 17 = 273Mi: half of it, 136.5 MiB, is below max_shm;
  // whole MiB down: 136Mi.
  p = pod({{"gpu-run.profile", "webtest"}}, {container("small", {{"nvidia.com/gpu", "1"}, {"memory", "256Mi"}})});
  out = patched(p, run(review_of(p)));
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["memory"], "273Mi");
  EXPECT_EQ(size_limit(out), "136Mi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_SIZE"), "17m");
  // A size asked for: the built-in default profile's max_shm (256 GiB) or the budget of the
  // raised limit, half of 10Gi + 3Gi.
  p = pod({{"gpu-run.shm-size", "3g"}}, {container("main", {{"memory", "10Gi"}})});
  out = patched(p, run(review_of(p)));
  EXPECT_EQ(size_limit(out), "6656Mi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_LIMIT"), "6656m");
  // Without a memory limit: no budget, and the kubelet mounts the emptyDir at its sizeLimit, so
  // the sizeLimit is the size (not the default profile's max_shm, 256Gi) and the container gets
  // a memory request of it for the scheduler to count.
  p = pod({{"gpu-run.shm-size", "3g"}}, {container("main")});
  out = patched(p, run(review_of(p)));
  EXPECT_EQ(size_limit(out), "3Gi");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["requests"]["memory"], "3Gi");
  EXPECT_FALSE(out["spec"]["containers"][0]["resources"].contains("limits")) << "a limit is never invented";
  // A pod's own GPU_RUN_SHM_LIMIT is replaced by the webhook's: here the plan, 17 MiB.
  p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["containers"][0]["env"] = json::array({{{"name", "GPU_RUN_SHM_LIMIT"}, {"value", "900g"}}});
  out = patched(p, run(review_of(p)));
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_LIMIT"), "17m");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["requests"]["memory"], "17Mi");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
  // A request without a limit is raised by the plan, as ever.
  p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["containers"][0]["resources"]["requests"] = {{"memory", "1Gi"}};
  out = patched(p, run(review_of(p)));
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["requests"]["memory"], "1041Mi");
  EXPECT_EQ(size_limit(out), "17Mi");
  EXPECT_EQ(out["spec"]["containers"][0]["env"].size(), 8u);
}

TEST_F(ReviewTest, BuiltInImagenetWithEightGpusMatchesCtlPlan) {
  // imagenet: batch 64 of 3x224x224 float32 (38535168 B) + 64 int64 (512 B -> 4096) =
  // 38539264 B; workers auto on 16 CPUs / 8 ranks = 2 (bound 64/8+4 = 12); per_rank =
  // (2*2+0) * 38539264 + 4096 * (8 + 10) = 154230784; NCCL's SHM segments (transport shm, 2
  // channels, 2 peers): 8 * 2 * 2 * (9637888 + 4096) = 308543488; need = headroom 1.05 x (8 *
  // 154230784 + 308543488) = 1.05 x 1542389760 B = 1544.48 MiB -> 1545 MiB rounded up (gpu-run-ctl
  // plan --profile imagenet --gpus 8 --cpus 16: 1545m). The webhook cannot tell whether the GPUs
  // reach the container: hold 0 assumed.
  const json p = pod({{"gpu-run.profile", "imagenet"}}, {container("trainer", {{"nvidia.com/gpu", 8}, {"cpu", "16"}})});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(shm_volume_size(patched(p, r)), "1545Mi");
}

TEST_F(ReviewTest, RayWorkerGetsWorkersFromItsCpuLimit) {
  // 1 GPU, cpu 3500m -> 3 CPUs; workers auto = min(max(1, 3 / 1), 4/8 + 4 = 4) = 3;
  // shm = (2*3+0) * 4 MiB + 4096 * (8 + 15) -> 25 MiB. No memory limit: none is added.
  const json p =
      pod({{"gpu-run.profile", "webauto"}}, {container("ray-worker", {{"nvidia.com/gpu", "1"}, {"cpu", "3500m"}})});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  const json out = patched(p, r);
  EXPECT_EQ(shm_volume_size(out), "25Mi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_NUM_WORKERS"), "3");
  EXPECT_FALSE(out["spec"]["containers"][0]["resources"]["limits"].contains("memory"));
}

// Issue 40: a team's tree shipped by `k8s webhook-manifests --profiles` comes back from the
// kubelet's atomic writer as `vision -> ..data/vision` (a real directory in the timestamped one);
// the webhook's store reads it as the flat layout, and an update (a new `..data`) takes effect
// without a restart.
TEST_F(ReviewTest, ATeamsProfileFromTheKubeletsNestedConfigMapVolume) {
  test::TempDir mounted;
  const fs::path volume = mounted.path() / "profiles";
  std::string team = kWebtest;
  team.replace(team.find("\"webtest\""), 9, "\"vision/webtest\"");
  test::write_config_map_volume(volume, {{"vision/webtest.json", team}, {"flat.json", kWebsmall}});
  ASSERT_TRUE(fs::is_symlink(volume / "vision"));
  ProfileCache cache({volume, dir_.path(), builtin_profile_dir(test::builtin_only_env)}, std::chrono::milliseconds(0));
  const json p = pod({{"gpu-run.profile", "vision/webtest"}}, {container("t", {{"nvidia.com/gpu", "8"}})});
  ReviewResult r = review_admission(review_of(p).dump(), config_, *cache.current());
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(shm_volume_size(patched(p, r)), "193Mi");  // kWebtest's 8 GPUs, worked above
  // The ConfigMap updated: batch_size 8 doubles the batches (8 x 32 MiB + 576 KiB + 64 MiB -> 321 MiB).
  std::string bigger = team;
  bigger.replace(bigger.find("\"batch_size\": 4"), 15, "\"batch_size\": 8");
  test::write_config_map_volume(volume, {{"vision/webtest.json", bigger}});
  r = review_admission(review_of(p).dump(), config_, *cache.current());
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(shm_volume_size(patched(p, r)), "321Mi");
}

TEST_F(ReviewTest, BuiltInServingProfilesPlanAsGpuRunCtlPlan) {
  // vllm with 2 GPUs (tests/unit/core/builtin_profiles_test.cpp works it): vLLM's rings 696,270,848
  // + NCCL 38,567,936, x 1.05 -> 736 MiB; no DataLoader, so no worker count to tell.
  json p = pod({{"gpu-run.profile", "vllm"}}, {container("vllm", {{"nvidia.com/gpu", "2"}})});
  ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(shm_volume_size(patched(p, r)), "736Mi");
  // ray-worker with the pod's 64Gi limit, under the deny policy (which plans with the limit):
  // int(64 GiB x 0.3) = 20,615,843,020 / 0.9 (plasma's share) -> 22,906,494,976 + NCCL 38,567,936
  // (2 GPUs), x 1.05 -> 22977 MiB, within half of 64Gi, so the limit stays.
  config_.policy = WebhookPolicy::kDeny;
  p = pod({{"gpu-run.profile", "ray-worker"}},
          {container("ray-worker", {{"nvidia.com/gpu", "2"}, {"memory", "64Gi"}})});
  r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  json out = patched(p, r);
  EXPECT_EQ(shm_volume_size(out), "22977Mi");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["memory"], "64Gi");
  // Under raise (issue 40: it was denied) the plan starts from the pod's own 64Gi and solves for the
  // limit Ray reads, 64Gi + /dev/shm: T = (0.3 x 64 GiB + 0.3 x 1.05 x NCCL) / (0.9 - 0.3 x 1.05)
  // -> 35,261,526,016; x 1.05 with NCCL -> 35349 MiB; the limit 65536 + 35349 = 100885Mi, whose
  // 0.3 (30265.5 MiB) fits 0.9 of the 35312 MiB NCCL leaves free (31781 MiB).
  config_.policy = WebhookPolicy::kRaise;
  r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  out = patched(p, r);
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["memory"], "100885Mi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_SIZE"), "35349m");
  // triton-python: one 1 MiB pool, below min_shm 256 MiB.
  p = pod({{"gpu-run.profile", "triton-python"}}, {container("triton", {{"nvidia.com/gpu", "1"}})});
  r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(shm_volume_size(patched(p, r)), "256Mi");
}

TEST_F(ReviewTest, NotebookWithoutGpus) {
  // No GPU anywhere: every container, sized for one loader without a pin thread:
  // (2*2+3) * 4 MiB + 72 KiB -> 29 MiB. Memory limit 8Gi -> 8221Mi.
  const json p = pod({{"gpu-run.profile", "webtest"}}, {container("notebook", {{"memory", "8Gi"}})});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  const json out = patched(p, r);
  EXPECT_EQ(shm_volume_size(out), "29Mi");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["memory"], "8221Mi");
  EXPECT_TRUE(mounts_shm(out["spec"]["containers"][0]));
}

TEST_F(ReviewTest, TwoGpuContainersAndASidecar) {
  // trainer-a 2 GPUs: 2 * (16 MiB + 72 KiB) + 64 MiB -> 97 MiB; trainer-b 1 GPU: 17 MiB. One
  // shared volume of 97 + 17 = 114 MiB, the size each is told; each container's limit raised by
  // its own plan; the sidecar untouched. The sizeLimit: each one's ceiling, the profile's max_shm
  // 1 GiB (below half of 16 GiB), summed.
  const json p = pod({{"gpu-run.profile", "webtest"}},
                     {container("trainer-a", {{"nvidia.com/gpu", "2"}, {"memory", "16Gi"}}), container("log-shipper"),
                      container("trainer-b", {{"nvidia.com/gpu", "1"}, {"memory", "16Gi"}})});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  const json out = patched(p, r);
  EXPECT_EQ(shm_volume_size(out), "114Mi");
  const json& cs = out["spec"]["containers"];
  EXPECT_EQ(size_limit(out), "2Gi");
  EXPECT_EQ(cs[0]["resources"]["limits"]["memory"], "16481Mi");
  EXPECT_EQ(env_of(cs[0], "GPU_RUN_SHM_SIZE"), "114m");
  EXPECT_EQ(env_of(cs[0], "GPU_RUN_SHM_LIMIT"), "2048m");
  EXPECT_FALSE(mounts_shm(cs[1]));
  EXPECT_FALSE(cs[1].contains("env"));
  EXPECT_EQ(cs[2]["resources"]["limits"]["memory"], "16401Mi");
  EXPECT_EQ(env_of(cs[2], "GPU_RUN_SHM_SIZE"), "114m");
  EXPECT_EQ(env_of(cs[2], "GPU_RUN_SHM_LIMIT"), "2048m");
  EXPECT_CONTAINS(r.fields, "containers=trainer-a,trainer-b");
}

TEST_F(ReviewTest, ContainersAnnotationNamesInitContainersToo) {
  json p = pod({{"gpu-run.profile", "webtest"}, {"gpu-run.containers", "prep, main"}},
               {container("main", {{"nvidia.com/gpu", "1"}}), container("gpu-other", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["initContainers"] = json::array({container("prep"), container("untouched-init")});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  const json out = patched(p, r);
  EXPECT_TRUE(mounts_shm(out["spec"]["containers"][0]));
  EXPECT_FALSE(mounts_shm(out["spec"]["containers"][1]));
  EXPECT_TRUE(mounts_shm(out["spec"]["initContainers"][0]));
  EXPECT_FALSE(mounts_shm(out["spec"]["initContainers"][1]));
  // main 17 MiB + prep (no GPU: 29 MiB) = 46 MiB.
  EXPECT_EQ(shm_volume_size(out), "46Mi");
}

TEST_F(ReviewTest, InitContainersAreNotMountedUnlessNamed) {
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["initContainers"] = json::array({container("prep", {{"nvidia.com/gpu", "1"}})});
  const json out = patched(p, run(review_of(p)));
  EXPECT_TRUE(mounts_shm(out["spec"]["containers"][0]));
  EXPECT_FALSE(mounts_shm(out["spec"]["initContainers"][0]));
}

TEST_F(ReviewTest, UnknownContainerNameIsDenied) {
  const json p = pod({{"gpu-run.profile", "webtest"}, {"gpu-run.containers", "nope"}}, {container("main")});
  const ReviewResult r = run(review_of(p));
  EXPECT_EQ(r.outcome, ReviewOutcome::kDenied);
  EXPECT_CONTAINS(r.review["response"]["status"]["message"].get<std::string>(), "no container 'nope'");
}

TEST_F(ReviewTest, ReAdmissionOfAPatchedPodChangesNothing) {
  const json p =
      pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "2"}, {"memory", "8Gi"}})});
  const json once = patched(p, run(review_of(p)));
  const ReviewResult again = run(review_of(once, "uid-2"));
  EXPECT_EQ(again.outcome, ReviewOutcome::kAllowed) << again.review.dump();
  EXPECT_FALSE(again.review["response"].contains("patch"));
  EXPECT_FALSE(again.review["response"].contains("warnings"));
  EXPECT_EQ(again.review["response"]["uid"], "uid-2");
  EXPECT_EQ(patched(once, again), once);
}

TEST_F(ReviewTest, ExistingDevShmMountIsLeftAloneWithAWarning) {
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["volumes"] = json::array({{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}});
  p["spec"]["containers"][0]["volumeMounts"] = json::array({{{"name", "dshm"}, {"mountPath", "/dev/shm/"}}});
  const ReviewResult r = run(review_of(p));
  EXPECT_EQ(r.outcome, ReviewOutcome::kWarned);
  EXPECT_EQ(r.review["response"]["allowed"], true);
  EXPECT_FALSE(r.review["response"].contains("patch"));
  EXPECT_CONTAINS(r.review["response"]["warnings"][0].get<std::string>(), "already mounts volume 'dshm' at /dev/shm");
}

TEST_F(ReviewTest, HostIpcPodIsNeverPatched) {
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["hostIPC"] = true;
  const ReviewResult r = run(review_of(p));
  EXPECT_EQ(r.outcome, ReviewOutcome::kWarned);
  EXPECT_FALSE(r.review["response"].contains("patch"));
  EXPECT_CONTAINS(r.review["response"]["warnings"][0].get<std::string>(), "hostIPC");
}

TEST_F(ReviewTest, CollidingVolumeNameIsAvoided) {
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["volumes"] = json::array({{{"name", "gpu-run-shm"}, {"emptyDir", json::object()}},
                                      {{"name", "gpu-run-shm-2"}, {"configMap", {{"name", "x"}}}}});
  p["spec"]["containers"][0]["volumeMounts"] = json::array({{{"name", "gpu-run-shm"}, {"mountPath", "/scratch"}}});
  const json out = patched(p, run(review_of(p)));
  ASSERT_EQ(out["spec"]["volumes"].size(), 3u);
  EXPECT_EQ(out["spec"]["volumes"][2]["name"], "gpu-run-shm-3");
  EXPECT_EQ(out["spec"]["containers"][0]["volumeMounts"][1]["name"], "gpu-run-shm-3");
}

TEST_F(ReviewTest, ExistingGpuRunEnvIsReplacedNotDuplicated) {
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["containers"][0]["env"] =
      json::array({{{"name", "GPU_RUN_NUM_WORKERS"}, {"value", "9"}}, {{"name", "GPU_RUN_DECISION"}, {"value", "{}"}}});
  const json out = patched(p, run(review_of(p)));
  const json& env = out["spec"]["containers"][0]["env"];
  // Profile, GPUs, workers (under the request's name and its alias), batch size, shm size,
  // its limit, the decision record: each once (a record the pod carried is the webhook's now).
  // The container's GPU_RUN_NUM_WORKERS=9 is its request, read as GPU_RUN_WORKERS (one name per
  // fact): 2 * 9 batches of 4 MiB + 4096 * (8 + 5 * 9) -> 73 MiB.
  EXPECT_EQ(env.size(), 8u);
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_DECISION"),
            out["metadata"]["annotations"]["gpu-run.decision"].get<std::string>());
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_GPUS"), "1");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_WORKERS"), "9");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_NUM_WORKERS"), "9");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_SIZE"), "73m");
}

TEST_F(ReviewTest, ContainerEnvIsARequestAsTheContractSays) {
  // GPU_RUN_SHM_SIZE in the container's env asks for that size (core/decision/contract.hpp).
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  p["spec"]["containers"][0]["env"] = json::array({{{"name", "GPU_RUN_SHM_SIZE"}, {"value", "2g"}}});
  const json out = patched(p, run(review_of(p)));
  EXPECT_EQ(shm_volume_size(out), "2Gi");
  EXPECT_EQ(size_limit(out), "2Gi");                          // above max_shm, asked for: no room to grow
  EXPECT_EQ(out["spec"]["containers"][0]["env"].size(), 3u);  // the size, its limit, the record
}

// The contract table as the webhook reads it: every fact under each name a pod may give it (the
// pod's annotation, the container's environment under the key's name and its alias) plans the
// same size, which differs from not giving it.
TEST_F(ReviewTest, EveryNameOfAFactPlansTheSameSize) {
  using Keys = std::map<std::string, std::string>;
  // A pod asks with an annotation: the other fact's, with the fact under test under each name.
  Keys asks;
  auto size_of = [&](const Keys& env, const Keys& annotations) {
    Keys all = asks;
    all.insert(annotations.begin(), annotations.end());
    json p = pod(all, {container("main", {{"nvidia.com/gpu", "2"}})});
    json& e = p["spec"]["containers"][0]["env"] = json::array();
    for (const auto& [k, v] : env) e.push_back({{"name", k}, {"value", v}});
    return shm_volume_size(patched(p, run(review_of(p))));
  };
  const std::map<RequestKey, std::string> value = {{RequestKey::kProfile, "webtest"},
                                                   {RequestKey::kGpus, "1"},
                                                   {RequestKey::kWorkers, "8"},
                                                   {RequestKey::kBatchSize, "32"},
                                                   {RequestKey::kShmSize, "3g"}};
  for (const RequestKeySpec& k : kRequestKeys) {
    asks = k.key == RequestKey::kProfile ? Keys{{"gpu-run.gpus", "2"}} : Keys{{"gpu-run.profile", "webtest"}};
    const Keys base;
    const std::string without = size_of(base, {});
    Keys by_env = base;
    by_env[k.env] = value.at(k.key);
    const std::string want = size_of(by_env, {});
    EXPECT_NE(want, without) << k.name << ": the test's value must change the size";
    EXPECT_EQ(size_of(base, {{k.annotation, value.at(k.key)}}), want) << k.annotation;
    if (k.env_alias) {
      Keys by_alias = base;
      by_alias[k.env_alias] = value.at(k.key);
      EXPECT_EQ(size_of(by_alias, {}), want) << k.env_alias;
    }
  }
  // Two values for the workers: denied, naming both.
  json p = pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "2"}})});
  p["spec"]["containers"][0]["env"] =
      json::array({{{"name", "GPU_RUN_WORKERS"}, {"value", "4"}}, {{"name", "GPU_RUN_NUM_WORKERS"}, {"value", "8"}}});
  const json resp = run(review_of(p)).review["response"];
  EXPECT_EQ(resp["allowed"], false);
  EXPECT_CONTAINS(resp["status"]["message"].get<std::string>(),
                  "GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values: give one");
}

// The issue's trap: `args: [python, train.py, --workers, 16]` with `cpu: 4` was planned for 4
// workers in silence, and `sh -c "python train.py -j 8"` too; kubectl prints these warnings.
TEST_F(ReviewTest, TheContainersCommandLineWorkersAreAWarning) {
  json p = pod({{"gpu-run.profile", "webauto"}}, {container("train", {{"nvidia.com/gpu", "1"}, {"cpu", "4"}})});
  p["spec"]["containers"][0]["args"] = json::array({"python", "train.py", "--workers", "16"});
  ReviewResult r = run(review_of(p));
  json resp = r.review["response"];
  ASSERT_TRUE(resp.contains("patch"));
  ASSERT_TRUE(resp.contains("warnings")) << resp.dump();
  ASSERT_EQ(resp["warnings"].size(), 1u);
  const std::string w = resp["warnings"][0];
  EXPECT_CONTAINS(w, "gpu-run: container 'train': the command line's '--workers 16' asks for 16 DataLoader workers");
  EXPECT_CONTAINS(w, "planned for 4 DataLoader workers per GPU rank");
  EXPECT_CONTAINS(w, "annotate the pod gpu-run.workers: \"16\"");
  // The same through the command of a shell.
  p["spec"]["containers"][0].erase("args");
  p["spec"]["containers"][0]["command"] = json::array({"sh", "-c", "python train.py -j 8"});
  resp = run(review_of(p)).review["response"];
  ASSERT_TRUE(resp.contains("warnings")) << resp.dump();
  EXPECT_CONTAINS(resp["warnings"][0].get<std::string>(), "'-j 8' asks for 8 DataLoader workers");
  // Agreeing workers: no warning.
  p["spec"]["containers"][0]["command"] = json::array({"python", "train.py", "-j", "4"});
  resp = run(review_of(p)).review["response"];
  EXPECT_FALSE(resp.contains("warnings")) << resp.dump();
}

TEST_F(ReviewTest, GpusAnnotationAndExplicitShmSize) {
  const json gpus = pod({{"gpu-run.profile", "webtest"}, {"gpu-run.gpus", "2"}}, {container("main")});
  EXPECT_EQ(shm_volume_size(patched(gpus, run(review_of(gpus)))), "97Mi");
  const json sized = pod({{"gpu-run.shm-size", "3g"}}, {container("main", {{"memory", "10Gi"}})});
  const ReviewResult r = run(review_of(sized));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  const json out = patched(sized, r);
  EXPECT_EQ(shm_volume_size(out), "3Gi");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["memory"], "13Gi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_SHM_SIZE"), "3072m");
}

TEST_F(ReviewTest, PolicyForAPlanOverTheMemoryBudget) {
  // 193 MiB of shm under a 256Mi limit: the budget is 50% = 128 MiB.
  const json p =
      pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "8"}, {"memory", "256Mi"}})});
  // raise: 256 + 193 = 449Mi (budget 224.5 MiB holds 193).
  EXPECT_EQ(patched(p, run(review_of(p)))["spec"]["containers"][0]["resources"]["limits"]["memory"], "449Mi");
  config_.policy = WebhookPolicy::kDeny;
  const ReviewResult denied = run(review_of(p));
  EXPECT_EQ(denied.outcome, ReviewOutcome::kDenied);
  EXPECT_EQ(denied.review["response"]["allowed"], false);
  EXPECT_EQ(denied.review["response"]["status"]["code"], 403);
  EXPECT_EQ(denied.review["response"]["status"]["message"],
            "gpu-run: container 'main': planned /dev/shm of 193MiB does not fit the memory limit 256MiB (shm pages "
            "count against it; at most 50% = 128MiB may be shm): raise resources.limits.memory to at least 386Mi, or "
            "lower gpu-run.workers (now 2) or gpu-run.batch-size (now 4)");
  config_.policy = WebhookPolicy::kWarn;
  const ReviewResult warned = run(review_of(p));
  EXPECT_EQ(warned.outcome, ReviewOutcome::kWarned);
  EXPECT_EQ(warned.review["response"]["allowed"], true);
  EXPECT_FALSE(warned.review["response"].contains("patch"));
  EXPECT_CONTAINS(warned.review["response"]["warnings"][0].get<std::string>(), "does not fit the memory limit");
}

// An explicit size over the budget: denied, as gpu-run refuses it (exit 2) and the runtime
// fails the container's start: core's decide_shm, in the pod's words.
TEST_F(ReviewTest, AnExplicitSizeOverTheBudgetIsDeniedAsAtEveryDoor) {
  config_.policy = WebhookPolicy::kDeny;
  const json p = pod({{"gpu-run.shm-size", "600Mi"}}, {container("main", {{"memory", "1Gi"}})});
  const ReviewResult denied = run(review_of(p));
  EXPECT_EQ(denied.outcome, ReviewOutcome::kDenied);
  EXPECT_EQ(denied.review["response"]["status"]["message"],
            "gpu-run: container 'main': gpu-run.shm-size 600MiB does not fit the memory limit 1GiB (shm pages "
            "count against it; at most 50% = 512MiB may be shm): raise resources.limits.memory to at least 1200Mi or "
            "ask for less");
  const ReviewResult fits =
      run(review_of(pod({{"gpu-run.shm-size", "500Mi"}}, {container("main", {{"memory", "1Gi"}})})));
  EXPECT_EQ(fits.outcome, ReviewOutcome::kPatched) << fits.review.dump();
}

TEST_F(ReviewTest, RaiseKeepsTheBudgetWithASmallFraction) {
  // fraction 0.25: 8Gi + 193Mi = 8385Mi holds 2096 MiB, enough; 256Mi + 193Mi = 449Mi holds
  // 112 MiB, not enough: the limit becomes limit_for(193 MiB) = 772Mi.
  config_.memory_fraction_max = 0.25;
  const json p =
      pod({{"gpu-run.profile", "webtest"}}, {container("main", {{"nvidia.com/gpu", "8"}, {"memory", "256Mi"}})});
  EXPECT_EQ(patched(p, run(review_of(p)))["spec"]["containers"][0]["resources"]["limits"]["memory"], "772Mi");
}

TEST_F(ReviewTest, AnUnknownProfileIsDeniedWithTheNamesThisWebhookKnows) {
  const ReviewResult r = run(review_of(pod({{"gpu-run.profile", "webtset"}}, {container("main")})));
  EXPECT_EQ(r.outcome, ReviewOutcome::kDenied);
  const std::string message = r.review["response"]["status"]["message"].get<std::string>();
  EXPECT_CONTAINS(message, "unknown profile 'webtset': did you mean webtest?");
  EXPECT_CONTAINS(message, "(profiles this webhook knows: ");
  EXPECT_CONTAINS(message, "imagenet");
  EXPECT_CONTAINS(message, "webauto");
  EXPECT_EQ(message.find("gpu-run-ctl"), std::string::npos) << message;
}

// The webhook's door: a pod that names an unreadable profile file (a link to itself) is denied,
// the message naming the file and the errno's words.
TEST_F(ReviewTest, AnUnreadableProfileIsDeniedWithItsErrno) {
  fs::create_symlink("loop.json", dir_ / "loop.json");
  const ReviewResult r = run(review_of(pod({{"gpu-run.profile", "loop"}}, {container("main")})));
  EXPECT_EQ(r.outcome, ReviewOutcome::kDenied);
  EXPECT_CONTAINS(r.review["response"]["status"]["message"].get<std::string>(),
                  (dir_ / "loop.json").string() + ": cannot open: " + std::strerror(ELOOP));
}

TEST_F(ReviewTest, OverMaxShmIsDeniedUnderRaiseAndDeny) {
  const json p = pod({{"gpu-run.profile", "websmall"}}, {container("main", {{"nvidia.com/gpu", "8"}})});
  const ReviewResult r = run(review_of(p));
  EXPECT_EQ(r.outcome, ReviewOutcome::kDenied);
  EXPECT_CONTAINS(r.review["response"]["status"]["message"].get<std::string>(),
                  "above the profile's max_shm 100MiB: lower gpu-run.workers or gpu-run.batch-size");
  config_.policy = WebhookPolicy::kWarn;
  EXPECT_EQ(run(review_of(p)).outcome, ReviewOutcome::kWarned);
}

TEST_F(ReviewTest, PodsWithoutAGpuRunAnnotationAndOtherKindsAreAllowedUnchanged) {
  const json plain = pod({{"team", "ml"}}, {container("main", {{"nvidia.com/gpu", "1"}})});
  ReviewResult r = run(review_of(plain));
  EXPECT_EQ(r.outcome, ReviewOutcome::kAllowed);
  EXPECT_FALSE(r.review["response"].contains("patch"));
  const json only_where = pod({{"gpu-run.containers", "main"}}, {container("main")});
  EXPECT_EQ(run(review_of(only_where)).outcome, ReviewOutcome::kAllowed);
  json deployment = review_of(plain);
  deployment["request"]["kind"] = {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}};
  r = run(deployment);
  EXPECT_EQ(r.outcome, ReviewOutcome::kAllowed);
  EXPECT_EQ(r.review["response"]["uid"], "uid-1");
  json update = review_of(pod({{"gpu-run.profile", "webtest"}}, {container("main")}));
  update["request"]["operation"] = "UPDATE";
  EXPECT_EQ(run(update).outcome, ReviewOutcome::kAllowed);
}

TEST_F(ReviewTest, NamespaceDefaultProfilePlansAPodThatNamesNone) {
  // ml's default is webtest: 8 GPUs -> 193 MiB (PyTorchJobDdpWorkerWithEightGpus), as if the pod
  // said gpu-run.profile: webtest.
  config_.namespace_profiles["ml"] = "webtest";
  const json p = pod({{"team", "x"}}, {container("pytorch", {{"nvidia.com/gpu", "8"}, {"memory", "64Gi"}}),
                                       container("log-shipper", {{"memory", "1Gi"}})});
  const ReviewResult r = run(review_of(p));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  const json out = patched(p, r);
  EXPECT_EQ(shm_volume_size(out), "193Mi");
  EXPECT_EQ(env_of(out["spec"]["containers"][0], "GPU_RUN_PROFILE"), "webtest");
  EXPECT_EQ(out["spec"]["containers"][0]["resources"]["limits"]["memory"], "65729Mi");
  EXPECT_FALSE(mounts_shm(out["spec"]["containers"][1]));
  EXPECT_EQ(out["spec"]["containers"][1]["resources"]["limits"]["memory"], "1Gi");
  EXPECT_CONTAINS(r.fields, "namespace_profile=webtest");
  // Re-admission of the patched pod changes nothing.
  const ReviewResult again = run(review_of(out, "uid-2"));
  EXPECT_EQ(again.outcome, ReviewOutcome::kAllowed) << again.review.dump();
  EXPECT_FALSE(again.review["response"].contains("patch"));
}

TEST_F(ReviewTest, NamespaceDefaultIsOnlyForItsNamespaceAndLosesToThePod) {
  config_.namespace_profiles["ml"] = "webtest";
  const json plain = pod(json::object(), {container("main", {{"nvidia.com/gpu", "1"}, {"cpu", "3"}})});
  json elsewhere = review_of(plain);
  elsewhere["request"]["namespace"] = "web";
  EXPECT_EQ(run(elsewhere).outcome, ReviewOutcome::kAllowed);
  EXPECT_FALSE(run(elsewhere).review["response"].contains("patch"));
  // The pod's own profile wins: webauto on 3 CPUs -> 3 workers, (2*3+0) * 4 MiB + (8+5*3) pages of
  // semaphores (92 KiB) -> 25 MiB.
  const json own = pod({{"gpu-run.profile", "webauto"}}, {container("main", {{"nvidia.com/gpu", "1"}, {"cpu", "3"}})});
  const ReviewResult r = run(review_of(own));
  ASSERT_EQ(r.outcome, ReviewOutcome::kPatched) << r.review.dump();
  EXPECT_EQ(shm_volume_size(patched(own, r)), "25Mi");
  EXPECT_EQ(r.fields.find("namespace_profile="), std::string::npos);
  // Another annotation without a profile takes the namespace's: webtest with 2 GPUs ->
  // 2 * (16 MiB + 72 KiB) + 64 MiB NCCL -> 97 MiB.
  const json gpus = pod({{"gpu-run.gpus", "2"}}, {container("main")});
  const ReviewResult g = run(review_of(gpus));
  ASSERT_EQ(g.outcome, ReviewOutcome::kPatched) << g.review.dump();
  EXPECT_EQ(shm_volume_size(patched(gpus, g)), "97Mi");
  EXPECT_EQ(env_of(patched(gpus, g)["spec"]["containers"][0], "GPU_RUN_PROFILE"), "webtest");
}

TEST_F(ReviewTest, NamespaceDefaultLeavesPodsWithoutGpusAlone) {
  config_.namespace_profiles["ml"] = "webtest";
  const ReviewResult r = run(review_of(pod(json::object(), {container("redis", {{"memory", "1Gi"}})})));
  EXPECT_EQ(r.outcome, ReviewOutcome::kAllowed);
  EXPECT_FALSE(r.review["response"].contains("patch"));
  EXPECT_FALSE(r.review["response"].contains("warnings"));
  // ...unless gpu-run.containers names them: one rank, 28 MiB of batches and the semaphore pages -> 29 MiB.
  const json named = pod({{"gpu-run.containers", "notebook"}}, {container("notebook")});
  const ReviewResult n = run(review_of(named));
  ASSERT_EQ(n.outcome, ReviewOutcome::kPatched) << n.review.dump();
  EXPECT_EQ(shm_volume_size(patched(named, n)), "29Mi");
}

TEST_F(ReviewTest, NamespaceDefaultThatCannotBeMetWarnsInsteadOfDenying) {
  // websmall refuses 8 GPUs (192 MiB > max_shm 100 MiB): the pod asked nothing, so it is
  // admitted unchanged with a warning under every policy; naming the profile is denied.
  config_.namespace_profiles["ml"] = "websmall";
  const json p = pod(json::object(), {container("main", {{"nvidia.com/gpu", "8"}})});
  for (WebhookPolicy policy : {WebhookPolicy::kRaise, WebhookPolicy::kDeny}) {
    config_.policy = policy;
    const ReviewResult r = run(review_of(p));
    EXPECT_EQ(r.outcome, ReviewOutcome::kWarned) << r.review.dump();
    EXPECT_EQ(r.review["response"]["allowed"], true);
    EXPECT_FALSE(r.review["response"].contains("patch"));
    EXPECT_CONTAINS(r.review["response"]["warnings"][0].get<std::string>(), "max_shm");
  }
  EXPECT_EQ(
      run(review_of(pod({{"gpu-run.profile", "websmall"}}, {container("main", {{"nvidia.com/gpu", "8"}})}))).outcome,
      ReviewOutcome::kDenied);
  config_.namespace_profiles["ml"] = "no-such-profile";
  EXPECT_EQ(run(review_of(p)).outcome, ReviewOutcome::kWarned);
}

TEST_F(ReviewTest, HostileInputNeverCrashes) {
  EXPECT_EQ(review_admission("{not json", config_, store()).outcome, ReviewOutcome::kError);
  EXPECT_EQ(review_admission("", config_, store()).outcome, ReviewOutcome::kError);
  EXPECT_EQ(review_admission("[]", config_, store()).outcome, ReviewOutcome::kError);
  EXPECT_EQ(review_admission(R"({"request": 7})", config_, store()).outcome, ReviewOutcome::kError);
  EXPECT_EQ(review_admission(std::string(100000, '[') + std::string(100000, ']'), config_, store()).outcome,
            ReviewOutcome::kError);
  const ReviewResult malformed = review_admission("{oops", config_, store());
  EXPECT_EQ(malformed.review["response"]["allowed"], true);
  EXPECT_EQ(malformed.review["response"]["uid"], "");

  auto outcome_of = [&](const json& annotations, const json& containers = json::array({container("main")})) {
    const ReviewResult r = run(review_of(pod(annotations, containers)));
    EXPECT_EQ(r.review["response"]["uid"], "uid-1");
    if (r.outcome == ReviewOutcome::kDenied) {
      EXPECT_FALSE(r.review["response"]["status"]["message"].get<std::string>().empty());
    }
    return std::string(review_outcome_name(r.outcome));
  };
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "../../etc/passwd"}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "/etc/gpu-run/x"}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", std::string("webtest\0x", 9)}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", std::string(1 << 20, 'a')}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"},
                        {"gpu-run.gpus", std::string("1\0"
                                                     "0",
                                                     3)}}),
            "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}, {"gpu-run.workers", "-1"}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}, {"gpu-run.batch-size", "0"}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}, {"gpu-run.shm-size", "1e99"}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", 7}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "no-such-profile"}}), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}}, json::array()), "warned");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}}, json::array({container("m", {{"nvidia.com/gpu", "many"}})})),
            "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}}, json::array({container("m", {{"memory", "16g"}})})), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}}, json::array({container("m", {{"cpu", "lots"}})})), "denied");
  EXPECT_EQ(outcome_of({{"gpu-run.profile", "webtest"}}, json::array({7, "x"})), "warned");

  json no_spec = review_of(pod({{"gpu-run.profile", "webtest"}}, json::array()));
  no_spec["request"]["object"].erase("spec");
  EXPECT_EQ(run(no_spec).outcome, ReviewOutcome::kWarned);
  json bad_object = review_of(pod({}, json::array()));
  bad_object["request"]["object"] = "pod";
  EXPECT_EQ(run(bad_object).outcome, ReviewOutcome::kError);
  json long_uid = review_of(pod({}, json::array()), std::string(1000, 'u'));
  EXPECT_EQ(run(long_uid).outcome, ReviewOutcome::kError);
}

TEST_F(ReviewTest, V1beta1IsAnsweredInKind) {
  json r = review_of(pod({{"team", "x"}}, json::array({container("main")})));
  r["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_EQ(run(r).review["apiVersion"], "admission.k8s.io/v1beta1");
}

}  // namespace
}  // namespace gpurun
