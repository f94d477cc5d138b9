#include "ctl/k8s/k8s.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "base/units.hpp"
#include "ctl/k8s/pod_templates.hpp"
#include "ctl/k8s/yaml.hpp"
#include "ctl/plan.hpp"
#include "decision/config.hpp"
#include "pod/pod_review.hpp"
#include "profiles/profile_store.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using test::builtin_only_env;
using test::host_with_cpus;

TEST(K8sQuantity, FormatsInTheLargestExactBinaryUnit) {
  EXPECT_EQ(k8s_quantity(1556 * kMiB), "1556Mi");
  EXPECT_EQ(k8s_quantity(2 * kGiB), "2Gi");
  EXPECT_EQ(k8s_quantity(kGiB + kGiB / 2), "1536Mi");
  EXPECT_EQ(k8s_quantity(1024ull * kGiB), "1Ti");
  EXPECT_EQ(k8s_quantity(4096), "4Ki");
  EXPECT_EQ(k8s_quantity(4097), "4097");
  EXPECT_EQ(k8s_quantity(0), "0");
}

TEST(K8sQuantity, ParsesKubernetesMemoryQuantities) {
  EXPECT_EQ(parse_k8s_quantity("16Gi", "--memory"), 16 * kGiB);
  EXPECT_EQ(parse_k8s_quantity("512Mi", "--memory"), 512 * kMiB);
  EXPECT_EQ(parse_k8s_quantity("1.5Gi", "--memory"), kGiB + kGiB / 2);
  EXPECT_EQ(parse_k8s_quantity("16G", "--memory"), 16000000000ull);
  EXPECT_EQ(parse_k8s_quantity("1.5k", "--memory"), 1500u);
  EXPECT_EQ(parse_k8s_quantity("123", "--memory"), 123u);
  EXPECT_EQ(parse_k8s_quantity("0.5Ki", "--memory"), 512u);
}

TEST(K8sQuantity, RejectsOtherSyntaxNamingTheFlag) {
  for (const char* bad :
       {"", "16g", "16m", "16GB", "1e3", "-1Gi", "Gi", "0", "0.0Mi", " 1Gi", "99999999999999999999"}) {
    Error e = expect_error([&] { parse_k8s_quantity(bad, "--memory"); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
    EXPECT_CONTAINS(e.what(), "--memory");
  }
  EXPECT_CONTAINS(expect_error([] { parse_k8s_quantity("16g", "--memory"); }).what(), "16Gi");
}

TEST(K8sRuntimeClass, NamesTheHandlerAndRefusesANameContainerdCannotHave) {
  const std::string yaml = runtime_class_manifest("gpu-run");
  EXPECT_CONTAINS(yaml,
                  "apiVersion: \"node.k8s.io/v1\"\nkind: \"RuntimeClass\"\nmetadata:\n  name: \"gpu-run\"\n"
                  "handler: \"gpu-run\"\nscheduling:\n  nodeSelector:\n    gpu-run.io/runtime: \"gpu-run\"\n");
  EXPECT_EQ(yaml.rfind('#', 0), 0u);  // a comment line first, then the manifest
  EXPECT_CONTAINS(runtime_class_manifest("gpu-run-b"), "handler: \"gpu-run-b\"");
  EXPECT_CONTAINS(runtime_class_manifest("gpu-run-b"), "gpu-run.io/runtime: \"gpu-run-b\"");
  EXPECT_EQ(runtime_node_label("gpu-run"), "gpu-run.io/runtime=gpu-run");
  for (const char* bad : {"", "GPU", "a.b", "gpu_run", "-x"}) {
    const Error e = expect_error([&] { runtime_class_manifest(bad); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
    EXPECT_CONTAINS(e.what(), "--handler");
  }
}

// The manifests k8s -f is given: a Pod with a 32Gi limit, a Deployment, a PyTorchJob, and objects
// with no pod template; comments and the form of what is not changed.
constexpr const char* kManifest = R"(# the team's training job
apiVersion: v1
kind: ConfigMap   # not a workload: passed through
metadata: {name: settings}
data:
  lr: "0.1"
---
# Source: train/templates/pod.yaml
apiVersion: v1
kind: Pod
metadata:
  name: train
  annotations:
    gpu-run.profile: imagenet
spec:
  containers:
  - name: pytorch
    image: pytorch/pytorch
    command: ["python", "train.py"]
    env:
    - name: EPOCHS
      value: "90"
    resources:
      limits: {memory: 32Gi, nvidia.com/gpu: 2, cpu: 16}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: infer
  namespace: ml
spec:
  replicas: 2
  selector:
    matchLabels: {app: infer}
  template:
    metadata:
      labels: {app: infer}
      annotations: {gpu-run.profile: imagenet, gpu-run.workers: "2"}
    spec:
      containers:
      - name: server
        image: example.test/infer:1
        resources:
          limits:
            nvidia.com/gpu: "1"
            memory: 8Gi
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: bert
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        metadata:
          annotations:
            gpu-run.profile: imagenet
        spec:
          containers:
          - name: pytorch
            image: example.test/bert:1
            resources:
              limits: {nvidia.com/gpu: 1, memory: 16Gi, cpu: "8"}
    Worker:
      replicas: 3
      template:
        spec:
          containers:
          - name: pytorch
            image: example.test/bert:1
            resources:
              limits: {nvidia.com/gpu: 4, memory: 64Gi, cpu: "32"}
---
apiVersion: v1
kind: Service
metadata:
  name: infer   # unchanged, comments and all
spec:
  ports: [{port: 80}]
)";

class K8sRenderTest : public ::testing::Test {
 protected:
  ProfileStore store() const { return ProfileStore({builtin_profile_dir(builtin_only_env)}); }

  K8sResult render(const std::string& text, const std::string* profile = nullptr) const {
    return render_k8s(text, "m.yaml", WebhookConfig{}, store(), profile);
  }

  // The webhook's patch for the pod of `tmpl` (its metadata and spec), applied to that pod.
  json webhook_pod(const ordered_json& tmpl, const std::string* profile = nullptr) const {
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    if (tmpl.contains("metadata")) pod["metadata"] = json::parse(tmpl["metadata"].dump());
    pod["spec"] = json::parse(tmpl["spec"].dump());
    // The webhook's review, but for the door named in the decision record.
    const PodReview r = review_pod(pod, WebhookConfig{}, store(), profile, "gpu-run-ctl k8s");
    EXPECT_EQ(r.outcome, ReviewOutcome::kPatched) << r.reason;
    return r.outcome == ReviewOutcome::kPatched ? pod.patch(r.patch) : pod;
  }

  static std::vector<ordered_json> values(const std::string& yaml) {
    std::vector<ordered_json> out;
    for (const YamlDocumentText& d : split_yaml_documents(yaml)) out.push_back(yaml_document_value(d.text, "t"));
    return out;
  }

  static std::uint64_t memory_limit(const ordered_json& container) {
    return parse_k8s_quantity(container["resources"]["limits"]["memory"].get<std::string>(), "limit");
  }

  static bool mounts_shm(const ordered_json& container) {
    for (const auto& m : container.value("volumeMounts", ordered_json::array()))
      if (m.value("mountPath", "") == "/dev/shm") return true;
    return false;
  }
};

TEST_F(K8sRenderTest, EveryTemplateAsTheWebhookPatchesItsPod) {
  // The PyTorchJob's Worker names no profile: --profile's.
  const std::string imagenet = "imagenet";
  const K8sResult r = render(kManifest, &imagenet);
  const std::vector<ordered_json> in = values(kManifest);
  const std::vector<ordered_json> out = values(r.manifest);
  ASSERT_EQ(out.size(), 5u) << r.manifest;
  const std::vector<YamlDocumentText> in_docs = split_yaml_documents(kManifest);
  const std::vector<YamlDocumentText> out_docs = split_yaml_documents(r.manifest);
  // Objects without a template: byte for byte, comments included.
  EXPECT_EQ(out_docs[0].text, in_docs[0].text);
  EXPECT_EQ(out_docs[4].text, in_docs[4].text);
  // The Pod: the webhook's patch of the same pod; its 32Gi limit only raised.
  EXPECT_EQ(json::parse(out[1].dump()), webhook_pod(in[1]));
  EXPECT_GE(memory_limit(out[1]["spec"]["containers"][0]), 32ull << 30);
  EXPECT_TRUE(mounts_shm(out[1]["spec"]["containers"][0]));
  EXPECT_EQ(out_docs[1].text.rfind("---\n# Source: train/templates/pod.yaml\napiVersion: v1\n", 0), 0u)
      << "the document's leading comment and its form: " << out_docs[1].text;
  EXPECT_CONTAINS(out_docs[1].text, "command: [\"python\", \"train.py\"]");
  EXPECT_CONTAINS(out_docs[1].text, "value: \"90\"");
  // The Deployment's template; the rest of it unchanged.
  ordered_json deployment = out[2];
  EXPECT_EQ(json::parse(deployment["spec"]["template"].dump()),
            json::parse(ordered_json({{"metadata", webhook_pod(in[2]["spec"]["template"])["metadata"]},
                                      {"spec", webhook_pod(in[2]["spec"]["template"])["spec"]}})
                            .dump()));
  deployment["spec"]["template"] = in[2]["spec"]["template"];
  EXPECT_EQ(deployment, in[2]);
  // Both of the PyTorchJob's roles.
  for (const char* role : {"Master", "Worker"}) {
    const ordered_json& tmpl = out[3]["spec"]["pytorchReplicaSpecs"][role]["template"];
    EXPECT_EQ(json::parse(tmpl["spec"].dump()),
              webhook_pod(in[3]["spec"]["pytorchReplicaSpecs"][role]["template"], &imagenet)["spec"])
        << role;
    EXPECT_TRUE(mounts_shm(tmpl["spec"]["containers"][0])) << role;
  }
  EXPECT_GE(memory_limit(out[3]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]),
            64ull << 30);
  ASSERT_EQ(r.notes.size(), 4u);
  EXPECT_CONTAINS(r.notes[0], "Pod train: /dev/shm ");
  EXPECT_CONTAINS(r.notes[2], "PyTorchJob bert spec.pytorchReplicaSpecs.Master.template: /dev/shm ");
}

TEST_F(K8sRenderTest, SizedOnceAndWorkersFromThePodsCpusOnly) {
  const K8sResult once = render(kManifest);
  const K8sResult twice = render(once.manifest);
  EXPECT_EQ(twice.manifest, once.manifest) << "a second run finds gpu-run's /dev/shm and leaves it";
  EXPECT_CONTAINS(twice.notes[0], "unchanged: already has gpu-run's /dev/shm");
  // The Pod's 16 CPUs: imagenet's workers_per_gpu "auto" over 2 ranks (never this machine's).
  const ordered_json pod = values(once.manifest)[1];
  std::string workers;
  for (const auto& e : pod["spec"]["containers"][0]["env"])
    if (e["name"] == "GPU_RUN_NUM_WORKERS") workers = e["value"];
  PlanOptions po;
  po.sizing.profile = "imagenet";
  po.sizing.gpus = "2";
  po.cpus = "16";
  EXPECT_EQ(workers, std::to_string(make_plan(po, Config{}, host_with_cpus(1), builtin_only_env).workers))
      << "as `plan --cpus 16` on a 1-CPU host";
}

// The issue's traps at `k8s -f`: a command line of other workers than the plan, planned in
// silence; now a warning on stderr (the notes), in the webhook's words.
TEST_F(K8sRenderTest, TheCommandLinesWorkersAreAWarning) {
  const std::string manifest =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: t, annotations: {gpu-run.profile: imagenet}}\nspec:\n"
      "  containers:\n  - name: train\n    image: x\n    args: [python, train.py, --workers, \"16\"]\n"
      "    resources: {limits: {nvidia.com/gpu: 1, cpu: 4}}\n";
  const K8sResult r = render(manifest);
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_CONTAINS(r.notes[0], "Pod t: /dev/shm ");
  EXPECT_CONTAINS(r.notes[1],
                  "warning: Pod t: container 'train': the command line's '--workers 16' asks for 16 "
                  "DataLoader workers");
  EXPECT_CONTAINS(r.notes[1], "annotate the pod gpu-run.workers: \"16\"");
  const std::string shell =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: t, annotations: {gpu-run.profile: imagenet}}\nspec:\n"
      "  containers:\n  - name: train\n    image: x\n    command: [sh, -c, \"python train.py -j 8\"]\n"
      "    resources: {limits: {nvidia.com/gpu: 1}}\n";
  const K8sResult s = render(shell);
  ASSERT_EQ(s.notes.size(), 2u);
  EXPECT_CONTAINS(s.notes[1], "'-j 8' asks for 8 DataLoader workers");
}

TEST_F(K8sRenderTest, ADefaultProfileForTemplatesThatNameNone) {
  const std::string manifest =
      "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: \"0 3 * * *\"\n"
      "  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n"
      "          containers:\n          - {name: train, image: x, resources: {limits: {nvidia.com/gpu: 1}}}\n"
      "          - {name: log, image: y}\n";
  EXPECT_EQ(render(manifest).manifest, manifest) << "no annotation, no --profile: unchanged";
  const std::string imagenet = "imagenet";
  const K8sResult r = render(manifest, &imagenet);
  const ordered_json cron = values(r.manifest)[0];
  const ordered_json& spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
  EXPECT_TRUE(mounts_shm(spec["containers"][0]));
  EXPECT_FALSE(mounts_shm(spec["containers"][1])) << "only the GPU container, as under namespace_profiles";
  EXPECT_CONTAINS(r.notes[0], "(profile imagenet)");
  EXPECT_CONTAINS(r.manifest, "- {name: log, image: y}") << "a flow map left as it was";
}

TEST_F(K8sRenderTest, JsonInJsonOutListsToo) {
  const std::string list = R"({
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
     "spec": {"template": {"metadata": {"annotations": {"gpu-run.profile": "imagenet"}},
              "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "4Gi"}}}]}}}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}
  ]
}
{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
)";
  const K8sResult r = render_k8s(list, "l.json", WebhookConfig{}, store(), nullptr);
  std::istringstream in(r.manifest);
  ordered_json first, second;
  in >> first >> second;
  EXPECT_TRUE(mounts_shm(first["items"][0]["spec"]["template"]["spec"]["containers"][0])) << r.manifest;
  EXPECT_EQ(first["items"][1],
            ordered_json::parse(R"({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})"));
  EXPECT_CONTAINS(r.manifest, "\n{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"ml\"}}\n")
      << "an object without a template, as it was";
  EXPECT_EQ(r.manifest.rfind("{\n  \"apiVersion\"", 0), 0u) << "indented as it was";
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_CONTAINS(r.notes[0], "items[0] StatefulSet s spec.template: /dev/shm");
}

TEST_F(K8sRenderTest, RefusesWithTheLineAndChangesNothing) {
  const std::string denied =
      "kind: ConfigMap\napiVersion: v1\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
      "    gpu-run.profile: no-such-profile\nspec:\n  containers: [{name: c, image: x}]\n";
  Error e = expect_error([&] { render(denied); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "m.yaml:3: Pod p: ");
  EXPECT_CONTAINS(e.what(), "no-such-profile");
  e = expect_error([&] { render("a: [1\n"); });
  EXPECT_CONTAINS(e.what(), "m.yaml:");
  EXPECT_CONTAINS(e.what(), "not YAML");
  e = expect_error([&] { render_k8s("{\"kind\": ", "x.json", WebhookConfig{}, store(), nullptr); });
  EXPECT_CONTAINS(e.what(), "x.json:1: not JSON");
  // hostIPC: the webhook leaves it with a warning; so does k8s -f.
  const std::string host_ipc =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: h, annotations: {gpu-run.profile: imagenet}}\n"
      "spec: {hostIPC: true, containers: [{name: c, image: x}]}\n";
  const K8sResult r = render(host_ipc);
  EXPECT_EQ(r.manifest, host_ipc);
  EXPECT_CONTAINS(r.notes[0], "warning: Pod h: unchanged: hostIPC");
}

TEST(K8sTemplates, WhereEachKindKeepsItsPodTemplates) {
  const auto at = [](const char* object) { return pod_template_pointers(ordered_json::parse(object)); };
  using V = std::vector<std::string>;
  EXPECT_EQ(at(R"({"apiVersion": "v1", "kind": "Pod", "spec": {}})"), V{""});
  EXPECT_EQ(at(R"({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template": {}}})"), V{"/spec/template"});
  EXPECT_EQ(at(R"({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {}}})"), V{"/spec/template"});
  EXPECT_EQ(at(R"({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {}}}}})"),
            V{"/spec/jobTemplate/spec/template"});
  EXPECT_EQ(at(R"({"apiVersion": "v1", "kind": "PodTemplate", "template": {}})"), V{"/template"});
  EXPECT_EQ(at(R"({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "spec": {"mpiReplicaSpecs":
                   {"Launcher": {"template": {}}, "Worker": {"replicas": 2, "template": {}}}, "slotsPerWorker": 1}})"),
            (V{"/spec/mpiReplicaSpecs/Launcher/template", "/spec/mpiReplicaSpecs/Worker/template"}));
  EXPECT_EQ(at(R"({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {"tfReplicaSpecs": {"PS": {}}}})"), V{})
      << "a role without a template";
  EXPECT_EQ(at(R"({"apiVersion": "example.test/v1", "kind": "Deployment", "spec": {"template": {}}})"), V{})
      << "another group's Deployment";
  EXPECT_EQ(at(R"({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": "x"}})"), V{});
  EXPECT_EQ(at(R"({"apiVersion": "v1", "kind": "ConfigMap"})"), V{});
}

TEST_F(K8sRenderTest, PlansTheServingBuiltIns) {
  // k8s -f calls the same core as plan and the webhook: vllm with 4 GPUs is 1356 MiB
  // (tests/unit/core/builtin_profiles_test.cpp works it by hand).
  const std::string vllm = R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve",
    "annotations": {"gpu-run.profile": "vllm"}}, "spec": {"containers": [{"name": "vllm", "image": "v",
    "resources": {"limits": {"nvidia.com/gpu": 4, "memory": "64Gi", "cpu": "16"}}}]}})";
  const json pod = json::parse(render_k8s(vllm, "p.json", WebhookConfig{}, store(), nullptr).manifest);
  bool found = false;
  for (const json& e : pod["spec"]["containers"][0]["env"])
    if (e["name"] == "GPU_RUN_SHM_SIZE") {
      EXPECT_EQ(e["value"], "1356m");
      found = true;
    }
  EXPECT_TRUE(found) << pod.dump();
}

// Issue 40: a pod annotated ray-worker with limits {memory: 64Gi, nvidia.com/gpu: 1} was refused
// ("the plan has no memory limit to take it from"). Planned from the pod's own limit, and sized
// so that Ray's store, 0.3 of the limit Ray reads (the raised one: 64Gi + /dev/shm), fits plasma's
// 0.9 of /dev/shm: S >= L/2 = 32 GiB (Ray's figures: tests/unit/core/engines_test.cpp).
TEST_F(K8sRenderTest, PlansRayWorkersFromThePodsOwnLimitAndHoldsAfterTheRaise) {
  const std::string ray = R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ray",
    "annotations": {"gpu-run.profile": "ray-worker"}}, "spec": {"containers": [{"name": "ray", "image": "r",
    "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "64Gi"}}}]}})";
  const json pod = json::parse(render_k8s(ray, "p.json", WebhookConfig{}, store(), nullptr).manifest);
  const json& c = pod["spec"]["containers"][0];
  std::uint64_t shm = 0;
  for (const json& e : c["env"])
    if (e["name"] == "GPU_RUN_SHM_SIZE") shm = parse_size(e["value"].get<std::string>(), "GPU_RUN_SHM_SIZE");
  ASSERT_GT(shm, 0u) << pod.dump();
  const std::uint64_t raised = parse_k8s_quantity(c["resources"]["limits"]["memory"].get<std::string>(), "limit");
  EXPECT_EQ(raised, 64 * kGiB + shm);
  EXPECT_GE(shm, 32 * kGiB);
  EXPECT_LE(0.3L * static_cast<long double>(raised), 0.9L * static_cast<long double>(shm));
  // Under deny, the limit is not raised: Ray reads 64 GiB, /dev/shm >= 64 GiB / 3 within its budget.
  WebhookConfig deny;
  deny.policy = WebhookPolicy::kDeny;
  const json kept = json::parse(render_k8s(ray, "p.json", deny, store(), nullptr).manifest);
  std::uint64_t kept_shm = 0;
  for (const json& e : kept["spec"]["containers"][0]["env"])
    if (e["name"] == "GPU_RUN_SHM_SIZE") kept_shm = parse_size(e["value"].get<std::string>(), "GPU_RUN_SHM_SIZE");
  EXPECT_GE(kept_shm, 64 * kGiB / 3);
  EXPECT_EQ(kept["spec"]["containers"][0]["resources"]["limits"]["memory"], "64Gi");
}

}  // namespace
}  // namespace gpurun
