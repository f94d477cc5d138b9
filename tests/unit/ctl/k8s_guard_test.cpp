#include "ctl/k8s/k8s_guard.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

const ordered_json& guard_object(const std::vector<ordered_json>& objects, const std::string& kind) {
  for (const ordered_json& o : objects)
    if (o["kind"] == kind) return o;
  static const ordered_json none;
  ADD_FAILURE() << "no " << kind;
  return none;
}

std::vector<std::string> guard_kinds(const std::vector<ordered_json>& objects) {
  std::vector<std::string> out;
  for (const ordered_json& o : objects) out.push_back(o["kind"]);
  return out;
}

TEST(GuardManifestsTest, TheObjectsInApplyOrder) {
  const auto objects = guard_manifests(GuardManifestOptions{});
  EXPECT_EQ(guard_kinds(objects),
            (std::vector<std::string>{"Namespace", "ResourceQuota", "DaemonSet", "Service", "NetworkPolicy",
                                      "ServiceMonitor", "PrometheusRule", "ConfigMap"}));
  const ordered_json& ns = guard_object(objects, "Namespace");
  EXPECT_EQ(ns["metadata"]["name"], "gpu-run-guard");
  EXPECT_EQ(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged");
  for (const ordered_json& o : objects) {
    if (o["kind"] != "Namespace") {
      EXPECT_EQ(o["metadata"]["namespace"], "gpu-run-guard") << o["kind"];
    }
  }
}

TEST(GuardManifestsTest, TheRunbookIsAnHttpsLinkToThisVersionsDocs) {
  EXPECT_EQ(kDefaultRunbookUrl,
            std::string("https://github.com/gpu-run/gpu-run/blob/v") + GPU_RUN_VERSION + "/docs/kubernetes.md");
}

TEST(GuardManifestsTest, GpuNodesByDefaultEveryNodeWithAllNodes) {
  const auto objects = guard_manifests(GuardManifestOptions{});
  const ordered_json& terms =
      guard_object(objects, "DaemonSet")["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);  // ORed
  EXPECT_EQ(terms[0]["matchExpressions"][0],
            ordered_json({{"key", "nvidia.com/gpu.present"}, {"operator", "In"}, {"values", {"true"}}}));
  EXPECT_EQ(terms[1]["matchExpressions"][0], ordered_json({{"key", "gpu-run.io/runtime"}, {"operator", "Exists"}}));
  GuardManifestOptions all;
  all.all_nodes = true;
  EXPECT_FALSE(guard_object(guard_manifests(all), "DaemonSet")["spec"]["template"]["spec"].contains("affinity"));
}

TEST(GuardManifestsTest, OnlyTheMonitoringNamespaceReachesTheMetrics) {
  GuardManifestOptions o;
  o.port = "9555";
  o.monitoring_namespace = "obs";
  const auto objects = guard_manifests(o);
  const ordered_json& spec = guard_object(objects, "NetworkPolicy")["spec"];
  EXPECT_EQ(spec["podSelector"]["matchLabels"],
            guard_object(objects, "DaemonSet")["spec"]["template"]["metadata"]["labels"]);
  EXPECT_EQ(spec["policyTypes"], ordered_json({"Ingress"}));
  ASSERT_EQ(spec["ingress"].size(), 1u);
  EXPECT_EQ(spec["ingress"][0]["from"],
            ordered_json::parse(R"([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}])"));
  EXPECT_EQ(spec["ingress"][0]["ports"], ordered_json::parse(R"([{"port": 9555, "protocol": "TCP"}])"));
  o.monitoring_namespace = "Obs_1";
  try {
    guard_manifests(o);
    ADD_FAILURE() << "a bad --monitoring-namespace was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_CONTAINS(std::string(e.what()), "--monitoring-namespace 'Obs_1'");
  }
}

TEST(GuardManifestsTest, TheDaemonSetHasOnlyWhatTheGuardNeeds) {
  GuardManifestOptions o;
  o.image = "registry.example/gpu-run-guard:1";
  o.port = "9555";
  const auto objects = guard_manifests(o);
  const ordered_json& d = guard_object(objects, "DaemonSet");
  const ordered_json& pod = d["spec"]["template"]["spec"];
  EXPECT_EQ(pod["hostPID"], true);
  EXPECT_FALSE(pod.contains("hostNetwork"));
  EXPECT_FALSE(pod.contains("hostIPC"));
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  EXPECT_EQ(pod["priorityClassName"], "system-node-critical");
  EXPECT_EQ(pod["tolerations"][0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(pod["tolerations"][0]["effect"], "NoSchedule");
  const ordered_json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/gpu-run-guard:1");
  EXPECT_EQ(c["args"], ordered_json::array({"guard", "--engine", "containerd", "--containerd-state", "/run/containerd",
                                            "--metrics", "0.0.0.0:9555", "--metrics-public"}));
  EXPECT_EQ(c["ports"][0]["containerPort"], 9555);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"], "metrics");
  const ordered_json& sc = c["securityContext"];
  EXPECT_EQ(sc["privileged"], false);
  EXPECT_EQ(sc["readOnlyRootFilesystem"], true);
  EXPECT_EQ(sc["capabilities"]["drop"], ordered_json::array({"ALL"}));
  EXPECT_EQ(sc["capabilities"]["add"], ordered_json::array({"SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE", "DAC_OVERRIDE"}));
  EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(d["spec"]["template"]["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/guard"],
            "unconfined");
  EXPECT_EQ(c["resources"]["requests"]["memory"], "32Mi");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "64Mi");
  // Each host path, and read-only unless the guard writes there.
  std::map<std::string, std::string> host_paths;
  for (const ordered_json& v : pod["volumes"])
    if (v.contains("hostPath")) host_paths[v["name"]] = v["hostPath"]["path"];
  EXPECT_EQ(host_paths,
            (std::map<std::string, std::string>{{"containerd-tasks", "/run/containerd/io.containerd.runtime.v2.task"},
                                                {"state", "/run/gpu-run"},
                                                {"host-shm", "/dev/shm"}}));
  for (const ordered_json& m : c["volumeMounts"]) {
    const std::string name = m["name"];
    EXPECT_EQ(m.value("readOnly", false), name != "state") << name;
    if (host_paths.count(name)) {
      EXPECT_EQ(m["mountPath"], host_paths[name]) << name;
    }
  }
}

TEST(GuardManifestsTest, ContainerdStateMovesTheWatchedPathAndTheArgument) {
  GuardManifestOptions o;
  o.containerd_state = "/run/k3s/containerd";
  const auto objects = guard_manifests(o);
  const ordered_json& pod = guard_object(objects, "DaemonSet")["spec"]["template"]["spec"];
  EXPECT_EQ(pod["volumes"][0]["hostPath"]["path"], "/run/k3s/containerd/io.containerd.runtime.v2.task");
  EXPECT_EQ(pod["containers"][0]["volumeMounts"][0]["mountPath"], "/run/k3s/containerd/io.containerd.runtime.v2.task");
  EXPECT_EQ(pod["containers"][0]["args"][4], "/run/k3s/containerd");
}

TEST(GuardManifestsTest, ScrapedAndAlerted) {
  const auto objects = guard_manifests(GuardManifestOptions{});
  const ordered_json& svc = guard_object(objects, "Service");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 9477);
  const ordered_json& endpoint = guard_object(objects, "ServiceMonitor")["spec"]["endpoints"][0];
  EXPECT_EQ(endpoint["port"], "metrics");
  EXPECT_EQ(endpoint["honorLabels"], true);
  const ordered_json& rules = guard_object(objects, "PrometheusRule")["spec"]["groups"][0]["rules"];
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0]["alert"], "GpuRunShmFullCannotGrow");
  EXPECT_CONTAINS(rules[0]["expr"].get<std::string>(), "gpu_run_shm_growth_blocked == 1");
  EXPECT_CONTAINS(rules[0]["expr"].get<std::string>(), "> 0.9");
  EXPECT_EQ(rules[1]["alert"], "GpuRunGuardDown");
  EXPECT_EQ(rules[1]["expr"], "up{job=\"gpu-run-guard\", namespace=\"gpu-run-guard\"} == 0");
  // What `up` cannot see: nodes without a guard pod, and no DaemonSet series at all.
  EXPECT_EQ(rules[2]["alert"], "GpuRunGuardNotOnEveryNode");
  EXPECT_EQ(
      rules[2]["expr"],
      "kube_daemonset_status_desired_number_scheduled{namespace=\"gpu-run-guard\", daemonset=\"gpu-run-guard\"} - "
      "kube_daemonset_status_number_available{namespace=\"gpu-run-guard\", daemonset=\"gpu-run-guard\"} > 0");
  EXPECT_EQ(rules[3]["alert"], "GpuRunGuardDaemonSetAbsent");
  EXPECT_CONTAINS(rules[3]["expr"].get<std::string>(), "absent(kube_daemonset_status_desired_number_scheduled{");
  for (const ordered_json& rule : rules)
    EXPECT_EQ(
        rule["annotations"]["runbook_url"], kDefaultRunbookUrl + "#" + [&] {
          std::string a = rule["alert"];
          for (char& ch : a) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          return a;
        }());
  GuardManifestOptions o;
  o.runbook_url = "https://wiki.example/gpu-run/kubernetes.html";
  EXPECT_EQ(
      guard_object(guard_manifests(o), "PrometheusRule")["spec"]["groups"][0]["rules"][1]["annotations"]["runbook_url"],
      "https://wiki.example/gpu-run/kubernetes.html#gpurunguarddown");
}

TEST(GuardManifestsTest, PlacedWhereTheClusterSays) {
  GuardManifestOptions o;
  const auto defaults = guard_manifests(o);
  EXPECT_EQ(guard_object(defaults, "DaemonSet")["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], "10%");
  o.tolerations = {"all", "dedicated=gpu:NoExecute", "nvidia.com/gpu", "team:PreferNoSchedule"};
  o.node_selectors = {"nvidia.com/gpu.present=true", "pool=train"};
  o.image_pull_secrets = {"regcred"};
  o.labels = {"release=kube-prometheus-stack"};
  o.max_unavailable = "3";
  o.priority_class = "gpu-agents";
  const auto objects = guard_manifests(o);
  const ordered_json& d = guard_object(objects, "DaemonSet");
  const ordered_json& pod = d["spec"]["template"]["spec"];
  EXPECT_EQ(pod["tolerations"], ordered_json::parse(R"([{"operator": "Exists"},
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"},
    {"key": "nvidia.com/gpu", "operator": "Exists"},
    {"key": "team", "operator": "Exists", "effect": "PreferNoSchedule"}])"));
  EXPECT_EQ(pod["nodeSelector"], ordered_json::parse(R"({"nvidia.com/gpu.present": "true", "pool": "train"})"));
  EXPECT_EQ(pod["imagePullSecrets"], ordered_json::parse(R"([{"name": "regcred"}])"));
  EXPECT_EQ(pod["priorityClassName"], "gpu-agents");
  EXPECT_EQ(d["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 3);
  EXPECT_EQ(guard_kinds(objects), (std::vector<std::string>{"Namespace", "DaemonSet", "Service", "NetworkPolicy",
                                                            "ServiceMonitor", "PrometheusRule", "ConfigMap"}))
      << "no ResourceQuota for a class of one's own";
  for (const ordered_json& object : objects) {
    EXPECT_EQ(object["metadata"]["labels"]["release"], "kube-prometheus-stack") << object["kind"];
    EXPECT_EQ(object["metadata"]["labels"]["app.kubernetes.io/name"], "gpu-run-guard") << object["kind"];
  }
  EXPECT_FALSE(d["spec"]["selector"]["matchLabels"].contains("release")) << "the selector stays the app's";
}

TEST(GuardManifestsTest, ACriticalClassOutsideKubeSystemGetsItsQuota) {
  GuardManifestOptions o;
  o.priority_class = "system-cluster-critical";
  const auto objects = guard_manifests(o);
  const ordered_json& quota = guard_object(objects, "ResourceQuota");
  EXPECT_EQ(quota["metadata"]["namespace"], "gpu-run-guard");
  EXPECT_EQ(quota["spec"]["scopeSelector"]["matchExpressions"][0],
            ordered_json::parse(R"({"scopeName": "PriorityClass", "operator": "In",
                                    "values": ["system-cluster-critical"]})"));
  o.namespace_name = "kube-system";
  EXPECT_EQ(guard_kinds(guard_manifests(o))[1], "DaemonSet") << "kube-system needs none";
}

TEST(GuardManifestsTest, NoMonitoringForAClusterWithoutPrometheusOperator) {
  GuardManifestOptions o;
  o.no_monitoring = true;
  EXPECT_EQ(guard_kinds(guard_manifests(o)),
            (std::vector<std::string>{"Namespace", "ResourceQuota", "DaemonSet", "Service", "NetworkPolicy"}));
  EXPECT_EQ(render_guard_manifests(o).find("ServiceMonitor"), std::string::npos);
}

TEST(GuardManifestsTest, TheDashboardIsAConfigMapOfItsJson) {
  const auto objects = guard_manifests(GuardManifestOptions{});
  const ordered_json& cm = guard_object(objects, "ConfigMap");
  EXPECT_EQ(cm["metadata"]["labels"]["grafana_dashboard"], "1");
  const ordered_json model = ordered_json::parse(cm["data"]["gpu-run-guard.json"].get<std::string>());
  EXPECT_EQ(model, guard_dashboard());
  ASSERT_FALSE(model["panels"].empty());
  std::string exprs;
  for (const ordered_json& panel : model["panels"])
    for (const ordered_json& target : panel["targets"]) {
      EXPECT_FALSE(target["expr"].get<std::string>().empty()) << panel["title"];
      exprs += target["expr"].get<std::string>() + "\n";
    }
  for (const char* metric :
       {"gpu_run_shm_used_bytes", "gpu_run_shm_size_bytes", "gpu_run_shm_peak_bytes", "gpu_run_shm_growths_total",
        "gpu_run_shm_growths_refused_total", "gpu_run_shm_growth_blocked", "gpu_run_guard_containers"})
    EXPECT_CONTAINS(exprs, metric);
}

TEST(GuardManifestsTest, RenderedAsOneYamlStreamThatSaysWhy) {
  const std::string text = render_guard_manifests(GuardManifestOptions{});
  EXPECT_EQ(text.rfind("# gpu-run's node guard in namespace gpu-run-guard", 0), 0u);
  std::size_t documents = 0;
  for (std::size_t at = text.find("\n---\n"); at != std::string::npos; at = text.find("\n---\n", at + 1)) ++documents;
  EXPECT_EQ(documents, 8u);
  for (const char* why : {"hostPID:", "SYS_PTRACE:", "SYS_ADMIN, SYS_CHROOT:", "DAC_OVERRIDE:",
                          "/run/gpu-run, read-write", "/dev/shm, read-only", "seccomp RuntimeDefault"})
    EXPECT_CONTAINS(text, why);
}

TEST(GuardManifestsTest, BadInputIsAUsageErrorNamingTheFlag) {
  const auto error_of = [](GuardManifestOptions o) { return expect_error([&] { guard_manifests(o); }); };
  GuardManifestOptions o;
  o.namespace_name = "Bad_NS";
  Error e = error_of(o);
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--namespace 'Bad_NS'");
  o = GuardManifestOptions{};
  o.image = "two words";
  EXPECT_CONTAINS(error_of(o).what(), "--image 'two words'");
  for (const char* port : {"0", "65536", "x", "", "-1", "123456"}) {
    o = GuardManifestOptions{};
    o.port = port;
    const Error pe = error_of(o);
    EXPECT_EQ(pe.exit_code(), kExitUsage) << port;
    EXPECT_CONTAINS(pe.what(), "--port '" + std::string(port) + "'");
  }
  for (const char* dir : {"run/containerd", "/run/containerd/", "/run/../etc", "/a b", "/", "//x", "/x/./y"}) {
    o = GuardManifestOptions{};
    o.containerd_state = dir;
    EXPECT_CONTAINS(error_of(o).what(), "--containerd-state '" + std::string(dir) + "'");
  }
  for (const char* t : {"x:NoRun", "=v", "k=v=w:NoSchedule", "a b", ""}) {
    o = GuardManifestOptions{};
    o.tolerations = {t};
    EXPECT_CONTAINS(error_of(o).what(), "--toleration '" + std::string(t) + "'");
  }
  const std::vector<std::pair<std::string, std::function<void(GuardManifestOptions&)>>> bad = {
      {"--node-selector 'a'", [](GuardManifestOptions& g) { g.node_selectors = {"a"}; }},
      {"--node-selector 'a=b c'", [](GuardManifestOptions& g) { g.node_selectors = {"a=b c"}; }},
      {"--label 'app.kubernetes.io/name=x'", [](GuardManifestOptions& g) { g.labels = {"app.kubernetes.io/name=x"}; }},
      {"--image-pull-secret 'Reg_Cred'", [](GuardManifestOptions& g) { g.image_pull_secrets = {"Reg_Cred"}; }},
      {"--priority-class ''", [](GuardManifestOptions& g) { g.priority_class = ""; }},
      {"--max-unavailable '0'", [](GuardManifestOptions& g) { g.max_unavailable = "0"; }},
      {"--max-unavailable '101%'", [](GuardManifestOptions& g) { g.max_unavailable = "101%"; }},
      {"--max-unavailable 'ten'", [](GuardManifestOptions& g) { g.max_unavailable = "ten"; }},
      {"--runbook-url 'wiki/page'", [](GuardManifestOptions& g) { g.runbook_url = "wiki/page"; }},
      {"--runbook-url 'https://w/x#y'", [](GuardManifestOptions& g) { g.runbook_url = "https://w/x#y"; }}};
  for (const auto& [flag, set] : bad) {
    o = GuardManifestOptions{};
    set(o);
    const Error fe = error_of(o);
    EXPECT_EQ(fe.exit_code(), kExitUsage) << flag;
    EXPECT_CONTAINS(fe.what(), flag);
  }
}

}  // namespace
}  // namespace gpurun
