#include "ctl/k8s/k8s_guard.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/k8s/manifest.hpp"
#include "decision/contract.hpp"
#include "guard/task_watch.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr const char* kGuardName = "gpu-run-guard";
// The guard's config (gpu-run-config(5): the "guard" knobs, memory_fraction_max), an optional
// ConfigMap the command does not print, so that applying a new output keeps one's edits.
constexpr const char* kGuardConfigMap = "gpu-run-guard-config";
constexpr const char* kGuardConfigDir = "/etc/gpu-run/guard";
constexpr const char* kGuardDashboardConfigMap = "gpu-run-guard-dashboard";
// Where the guard keeps guard.lock (one guard a host), guard.alive (its sign to the node's doors),
// guard.state (what a restarted guard resumes) and resize/ (the locks gpu-run-ctl resize takes
// turns on): node_guard.cpp, file_lock.hpp.
constexpr const char* kGuardRunDir = "/run/gpu-run";

// The port of the metrics server, 1 to 65535.
int guard_port(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 5 && text.find_first_not_of("0123456789") == std::string::npos;
  const int port = digits ? std::stoi(text) : 0;
  if (port < 1 || port > 65535)
    throw usage_error("--port '" + k8s_shown(text) + "': expected the metrics port, 1 to 65535");
  return port;
}

// containerd's state directory on the nodes (k3s: /run/k3s/containerd), where the guard watches
// the tasks: an absolute path of printable characters, without "." or ".." components.
void check_containerd_state(const std::string& dir) {
  bool ok = dir.size() >= 2 && dir.size() <= 256 && dir[0] == '/' && dir.back() != '/';
  for (const char ch : dir) ok = ok && static_cast<unsigned char>(ch) > ' ' && ch != 0x7f;
  ok = ok && dir.find("//") == std::string::npos && (dir + "/").find("/./") == std::string::npos &&
       (dir + "/").find("/../") == std::string::npos;
  if (!ok)
    throw usage_error("--containerd-state '" + k8s_shown(dir) +
                      "': expected containerd's state directory on the nodes, an absolute path (default "
                      "/run/containerd)");
}

// The DaemonSet's rolling update: N nodes or N% of them at a time (at least one).
ordered_json max_unavailable(const std::string& text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string digits = percent ? text.substr(0, text.size() - 1) : text;
  const bool ok = !digits.empty() && digits.size() <= 6 && digits.find_first_not_of("0123456789") == std::string::npos;
  const long n = ok ? std::stol(digits) : 0;
  if (n < 1 || (percent && n > 100))
    throw usage_error("--max-unavailable '" + k8s_shown(text) +
                      "': expected how many nodes' guards a rollout may stop at once, N or N% (1% to 100%)");
  return percent ? ordered_json(std::to_string(n) + "%") : ordered_json(n);
}

ordered_json guard_metadata(const std::string& name, const std::string& ns) {
  return manifest_metadata(name, ns, kGuardName);
}

ordered_json host_path_volume(const char* name, const std::string& path, const char* type) {
  return {{"name", name}, {"hostPath", {{"path", path}, {"type", type}}}};
}

bool is_critical_priority_class(const std::string& name) {
  for (const char* critical : kCriticalPriorityClasses)
    if (name == critical) return true;
  return false;
}

ordered_json daemon_set(const std::string& ns, const std::string& image, int port, const std::string& state,
                        const DaemonSetPlacement& placement, const ProfileTree* profiles) {
  const std::string tasks = state + "/" + kContainerdTaskDir;
  // The guard's loops' progress, not /metrics: its table answers while a loop is stuck (guard_health.hpp).
  const ordered_json probe = {{"httpGet", {{"path", "/healthz"}, {"port", "metrics"}}}, {"timeoutSeconds", 2}};
  ordered_json liveness = probe;
  liveness["periodSeconds"] = 20;
  liveness["failureThreshold"] = 3;
  ordered_json readiness = probe;
  readiness["httpGet"]["path"] = "/readyz";
  readiness["periodSeconds"] = 10;
  ordered_json container = {
      {"name", "guard"},
      {"image", image},
      {"args",
       {"guard", "--engine", "containerd", "--containerd-state", state, "--metrics", "0.0.0.0:" + std::to_string(port),
        "--metrics-public"}},
      {"env", {{{"name", "GPU_RUN_CONFIG"}, {"value", std::string(kGuardConfigDir) + "/config.json"}}}},
      {"ports", {{{"name", "metrics"}, {"containerPort", port}, {"protocol", "TCP"}}}},
      {"livenessProbe", liveness},
      {"readinessProbe", readiness},
      // bench/GUARD.md: 1.5% of a core for 50 pods sampled at 100 Hz; bench/RELIABILITY.md: 11 MiB
      // resident, flat over 500 containers. No tight CPU limit: a throttled guard grows late.
      {"resources",
       {{"requests", {{"cpu", "20m"}, {"memory", "32Mi"}}}, {"limits", {{"cpu", "1"}, {"memory", "64Mi"}}}}},
      // Why each: the header of render_guard_manifests, and docs/kubernetes.md.
      {"securityContext",
       {{"privileged", false},
        {"readOnlyRootFilesystem", true},
        {"runAsUser", 0},
        {"capabilities", {{"drop", {"ALL"}}, {"add", {"SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE", "DAC_OVERRIDE"}}}},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"volumeMounts",
       {{{"name", "containerd-tasks"},
         {"mountPath", tasks},
         {"readOnly", true},
         {"mountPropagation", "HostToContainer"}},
        {{"name", "state"}, {"mountPath", kGuardRunDir}},
        {{"name", "host-shm"}, {"mountPath", "/dev/shm"}, {"readOnly", true}},
        {{"name", "config"}, {"mountPath", kGuardConfigDir}, {"readOnly", true}},
        {{"name", "profiles"}, {"mountPath", "/etc/gpu-run/profiles.d"}, {"readOnly", true}}}}};
  ordered_json pod_spec = {{"hostPID", true},
                           {"automountServiceAccountToken", false},
                           {"terminationGracePeriodSeconds", 10},
                           {"containers", ordered_json::array({container})},
                           {"volumes",
                            {host_path_volume("containerd-tasks", tasks, "Directory"),
                             host_path_volume("state", kGuardRunDir, "DirectoryOrCreate"),
                             host_path_volume("host-shm", "/dev/shm", "Directory"),
                             {{"name", "config"}, {"configMap", {{"name", kGuardConfigMap}, {"optional", true}}}},
                             profiles_volume(profiles)}}};
  apply_placement(pod_spec, placement);
  ordered_json d = manifest_object("apps/v1", "DaemonSet", guard_metadata(kGuardName, ns));
  d["spec"] = {{"selector", {{"matchLabels", app_labels(kGuardName)}}},
               // A rollout stops the guard on this many nodes at once (their pods keep what they have).
               {"updateStrategy",
                {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", placement.max_unavailable}}}}},
               {"template",
                {{"metadata",
                  {{"labels", app_labels(kGuardName)},
                   // The runtime's AppArmor profile denies mount and ptrace of other profiles' processes.
                   {"annotations", {{"container.apparmor.security.beta.kubernetes.io/guard", "unconfined"}}}}},
                 {"spec", pod_spec}}}};
  return d;
}

// What the alert's labels name: a pod's container, or (an engine's container) its name.
constexpr const char* kWhichContainer =
    "{{ if $labels.pod }}pod {{ $labels.namespace }}/{{ $labels.pod }} container {{ $labels.container }}"
    "{{ else }}container {{ $labels.container_name }}{{ end }} on {{ $labels.node }}";

ordered_json guard_prometheus_rule(const std::string& ns, const std::string& runbooks) {
  // gpu_run_shm_growth_blocked, not the refused counter: the counter moves once an episode, and a
  // /dev/shm that stays full after one refusal keeps it flat.
  const ordered_json full = prometheus_alert(
      "GpuRunShmFullCannotGrow",
      "(gpu_run_shm_used_bytes / gpu_run_shm_size_bytes > 0.9) and (gpu_run_shm_growth_blocked == 1)", nullptr,
      runbooks, "/dev/shm above 90% and the guard cannot grow it",
      std::string(kWhichContainer) +
          ": /dev/shm is {{ $value | humanizePercentage }} full and gpu-run's guard may not grow it (at the "
          "profile's max_shm, the memory budget or an emptyDir's sizeLimit, or a remount failed: its log "
          "says which). DataLoader workers fail with a bus error once it is full; raise the limit or "
          "lower workers or batch size.");
  const ordered_json down =
      prometheus_alert("GpuRunGuardDown", "up{job=\"" + std::string(kGuardName) + "\", namespace=\"" + ns + "\"} == 0",
                       "5m", runbooks, "gpu-run's node guard is not answering",
                       "The guard on {{ $labels.node }} ({{ $labels.pod }}) has not answered scrapes for 5 minutes: "
                       "/dev/shm of that node's pods is not grown.");
  // What `up` cannot see: a node whose guard pod never started has no target at all.
  // kube-state-metrics' DaemonSet series count the nodes that should run one.
  const std::string daemonset = "{namespace=\"" + ns + "\", daemonset=\"" + kGuardName + "\"}";
  const ordered_json missing = prometheus_alert(
      "GpuRunGuardNotOnEveryNode",
      "kube_daemonset_status_desired_number_scheduled" + daemonset + " - kube_daemonset_status_number_available" +
          daemonset + " > 0",
      "15m", runbooks, "gpu-run's node guard is missing on some nodes",
      "{{ $value }} node(s) that should run gpu-run's guard have had no available guard pod for 15 minutes "
      "(not scheduled, pending, crash-looping or not ready): /dev/shm of their pods is not grown.");
  const ordered_json unseen = prometheus_alert(
      "GpuRunGuardDaemonSetAbsent", "absent(kube_daemonset_status_desired_number_scheduled" + daemonset + ")", "15m",
      runbooks, "no kube-state-metrics series for gpu-run's guard DaemonSet",
      "Prometheus has had no kube_daemonset_status_desired_number_scheduled for DaemonSet " + ns + "/" + kGuardName +
          " for 15 minutes: the DaemonSet is gone, or kube-state-metrics is not scraped, and "
          "GpuRunGuardNotOnEveryNode cannot see a node without a guard.");
  ordered_json rule = manifest_object("monitoring.coreos.com/v1", "PrometheusRule", guard_metadata(kGuardName, ns));
  rule["spec"] = {{"groups", {{{"name", kGuardName}, {"rules", {full, down, missing, unseen}}}}}};
  return rule;
}

// The dashboard's selection, in every panel's queries.
constexpr const char* kPodSelector = "{namespace=~\"$namespace\", pod=~\"$pod\"}";

ordered_json dashboard_target(const std::string& ref, const std::string& expr, const std::string& legend) {
  return {{"refId", ref},
          {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
          {"expr", expr},
          {"legendFormat", legend}};
}

ordered_json dashboard_panel(int id, const char* type, const char* title, const char* unit, int x, int y,
                             ordered_json targets) {
  return {{"id", id},
          {"type", type},
          {"title", title},
          {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
          {"gridPos", {{"h", 8}, {"w", 12}, {"x", x}, {"y", y}}},
          {"fieldConfig", {{"defaults", {{"unit", unit}}}, {"overrides", ordered_json::array()}}},
          {"targets", std::move(targets)}};
}

ordered_json dashboard_variable(const char* name, const char* label, const std::string& query) {
  return {{"name", name},    {"label", label},
          {"type", "query"}, {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
          {"query", query},  {"definition", query},
          {"refresh", 2},    {"includeAll", true},
          {"multi", true},   {"allValue", ".*"},
          {"sort", 1}};
}

}  // namespace

ordered_json gpu_node_affinity(bool or_runtime_label) {
  // Terms are ORed: a node with either label.
  ordered_json terms = {
      {{"matchExpressions", {{{"key", kGpuPresentLabel}, {"operator", "In"}, {"values", {"true"}}}}}}};
  if (or_runtime_label) terms.push_back({{"matchExpressions", {{{"key", kRuntimeNodeLabel}, {"operator", "Exists"}}}}});
  return {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", {{"nodeSelectorTerms", terms}}}}}};
}

DaemonSetPlacement daemon_set_placement(const DaemonSetPlacementFlags& o, const std::string& whose,
                                        bool or_runtime_label) {
  DaemonSetPlacement p;
  for (const std::string& t :
       o.tolerations.empty() ? std::vector<std::string>{"nvidia.com/gpu:NoSchedule"} : o.tolerations)
    p.tolerations.push_back(parse_toleration(t));
  p.node_selector = parse_label_flags(o.node_selectors, "--node-selector");
  if (!o.all_nodes) p.affinity = gpu_node_affinity(or_runtime_label);
  p.pull_secrets = image_pull_secrets(o.image_pull_secrets, whose);
  if (!is_dns_subdomain(o.priority_class))
    throw usage_error("--priority-class '" + k8s_shown(o.priority_class) +
                      "': expected a PriorityClass's name (lowercase letters, digits, '-' and '.')");
  p.priority_class = o.priority_class;
  p.max_unavailable = max_unavailable(o.max_unavailable);
  return p;
}

void apply_placement(ordered_json& pod_spec, const DaemonSetPlacement& p) {
  pod_spec["priorityClassName"] = p.priority_class;
  pod_spec["tolerations"] = p.tolerations;
  if (!p.node_selector.empty()) pod_spec["nodeSelector"] = p.node_selector;
  if (!p.affinity.is_null()) pod_spec["affinity"] = p.affinity;
  if (!p.pull_secrets.empty()) pod_spec["imagePullSecrets"] = p.pull_secrets;
}

void add_namespace_and_image_options(CLI::App& cmd, std::string& namespace_name, std::string& image,
                                     const std::string& who, const std::string& image_help) {
  cmd.add_option("--namespace", namespace_name, "Namespace to run " + who + " in")
      ->type_name("NS")
      ->capture_default_str();
  cmd.add_option("--image", image, image_help)->type_name("IMAGE");
}

void add_placement_options(CLI::App& cmd, DaemonSetPlacementFlags& o, const std::string& what) {
  cmd.add_option("--toleration", o.tolerations,
                 "A taint " + what +
                     " pods tolerate (repeatable; replaces the default nvidia.com/gpu:NoSchedule): "
                     "KEY=VALUE:EFFECT, KEY:EFFECT, KEY (any value and effect), or all (every taint)")
      ->type_name("TOLERATION");
  cmd.add_option("--node-selector", o.node_selectors, "Run only on nodes with this label (repeatable)")
      ->type_name("KEY=VALUE");
  cmd.add_flag("--all-nodes", o.all_nodes,
               std::string("Every node the tolerations admit, not only GPU nodes (by default a node affinity on ") +
                   kGpuPresentLabel + "=true, NVIDIA's GPU Feature Discovery's label, or gpu-run's " +
                   kRuntimeNodeLabel + ")");
  cmd.add_option("--image-pull-secret", o.image_pull_secrets,
                 "A Secret in " + what + " namespace to pull the image with (repeatable)")
      ->type_name("NAME");
  cmd.add_option("--priority-class", o.priority_class,
                 "The pods' PriorityClass (system-node-critical and system-cluster-critical get the "
                 "ResourceQuota a namespace other than kube-system needs)")
      ->type_name("NAME")
      ->capture_default_str();
  cmd.add_option("--max-unavailable", o.max_unavailable, "Nodes whose pod a rollout stops at once: N or N%")
      ->type_name("N|N%")
      ->capture_default_str();
}

std::string tolerated_words(const DaemonSetPlacementFlags& o) {
  std::string tolerated;
  for (const std::string& t :
       o.tolerations.empty() ? std::vector<std::string>{"nvidia.com/gpu:NoSchedule"} : o.tolerations)
    tolerated += (tolerated.empty() ? "" : ", ") + (t == "all" ? std::string("every taint") : t);
  return tolerated;
}

ordered_json parse_toleration(const std::string& text) {
  if (text == "all") return {{"operator", "Exists"}};
  static const char* const effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
  const auto colon = text.rfind(':');
  const std::string effect = colon == std::string::npos ? "" : text.substr(colon + 1);
  const std::string taint = text.substr(0, colon);
  const auto eq = taint.find('=');
  const std::string key = taint.substr(0, eq);
  bool ok = is_label_key(key) && (eq == std::string::npos || is_label_value(taint.substr(eq + 1)));
  if (colon != std::string::npos)
    ok = ok && std::find(std::begin(effects), std::end(effects), effect) != std::end(effects);
  if (!ok)
    throw usage_error("--toleration '" + k8s_shown(text) +
                      "': expected KEY=VALUE:EFFECT, KEY:EFFECT or KEY (EFFECT NoSchedule, PreferNoSchedule or "
                      "NoExecute), or all to tolerate every taint");
  ordered_json t = {{"key", key}};
  if (eq == std::string::npos) {
    t["operator"] = "Exists";
  } else {
    t["operator"] = "Equal";
    t["value"] = taint.substr(eq + 1);
  }
  if (!effect.empty()) t["effect"] = effect;
  return t;
}

ordered_json guard_dashboard() {
  const std::string sel = kPodSelector;
  const std::string who = "{{namespace}}/{{pod}} {{container}}";
  ordered_json panels = ordered_json::array();
  panels.push_back(
      dashboard_panel(1, "timeseries", "/dev/shm used and size", "bytes", 0, 0,
                      ordered_json::array({dashboard_target("A", "gpu_run_shm_used_bytes" + sel, who + " used"),
                                           dashboard_target("B", "gpu_run_shm_size_bytes" + sel, who + " size")})));
  ordered_json full = dashboard_panel(
      2, "timeseries", "/dev/shm used / size", "percentunit", 12, 0,
      ordered_json::array(
          {dashboard_target("A", "gpu_run_shm_used_bytes" + sel + " / gpu_run_shm_size_bytes" + sel, who)}));
  full["fieldConfig"]["defaults"]["max"] = 1;
  full["fieldConfig"]["defaults"]["thresholds"] = {
      {"mode", "absolute"}, {"steps", {{{"color", "green"}, {"value", nullptr}}, {{"color", "red"}, {"value", 0.9}}}}};
  panels.push_back(full);
  panels.push_back(dashboard_panel(3, "timeseries", "Peak use since guarded", "bytes", 0, 8,
                                   ordered_json::array({dashboard_target("A", "gpu_run_shm_peak_bytes" + sel, who)})));
  panels.push_back(dashboard_panel(
      4, "timeseries", "Growths and refused growths", "short", 12, 8,
      ordered_json::array(
          {dashboard_target("A", "increase(gpu_run_shm_growths_total" + sel + "[$__rate_interval])", who + " grown"),
           dashboard_target("B", "increase(gpu_run_shm_growths_refused_total" + sel + "[$__rate_interval])",
                            who + " refused")})));
  panels.push_back(dashboard_panel(
      5, "stat", "Containers whose /dev/shm cannot grow now", "short", 0, 16,
      ordered_json::array(
          {dashboard_target("A", "sum(gpu_run_shm_growth_blocked" + sel + ") or vector(0)", "cannot grow")})));
  panels.push_back(
      dashboard_panel(6, "timeseries", "Containers each guard samples", "short", 12, 16,
                      ordered_json::array({dashboard_target("A", "gpu_run_guard_containers", "{{node}}")})));
  ordered_json datasource = {
      {"name", "datasource"}, {"label", "Data source"}, {"type", "datasource"}, {"query", "prometheus"}};
  return {
      {"uid", kGuardName},
      {"title", "gpu-run: /dev/shm guard"},
      {"tags", {"gpu-run"}},
      {"timezone", "browser"},
      {"schemaVersion", 36},
      {"version", 1},
      {"editable", true},
      {"refresh", "30s"},
      {"time", {{"from", "now-6h"}, {"to", "now"}}},
      {"templating",
       {{"list",
         {datasource, dashboard_variable("namespace", "Namespace", "label_values(gpu_run_shm_size_bytes, namespace)"),
          dashboard_variable("pod", "Pod", "label_values(gpu_run_shm_size_bytes{namespace=~\"$namespace\"}, pod)")}}}},
      {"annotations", {{"list", ordered_json::array()}}},
      {"panels", panels}};
}

std::vector<ordered_json> guard_manifests(const GuardManifestOptions& o, const ProfileTree* profiles) {
  const std::string& ns = o.namespace_name;
  check_manifest_namespace(ns);
  const std::string image = manifest_image(o.image, kDefaultGuardImage);
  const int port = guard_port(o.port);
  check_containerd_state(o.containerd_state);
  const DaemonSetPlacement pod = daemon_set_placement(o, "the guard's", /*or_runtime_label=*/true);
  check_manifest_namespace(o.monitoring_namespace, "--monitoring-namespace");
  const ordered_json labels = parse_label_flags(o.labels, "--label");
  check_runbook_url(o.runbook_url);

  std::vector<ordered_json> out;
  ordered_json ns_labels = app_labels(kGuardName);
  // The pod needs hostPID, hostPath volumes and added capabilities: Pod Security's "privileged".
  ns_labels["pod-security.kubernetes.io/enforce"] = "privileged";
  out.push_back(manifest_object("v1", "Namespace", {{"name", ns}, {"labels", ns_labels}}));
  if (ns != "kube-system" && is_critical_priority_class(pod.priority_class)) {
    // Pods of a system-*-critical class outside kube-system are admitted only under a quota
    // that names the class (GKE's ResourceQuota admission configuration; docs/kubernetes.md).
    ordered_json quota =
        manifest_object("v1", "ResourceQuota", guard_metadata(kGuardName + std::string("-critical-pods"), ns));
    quota["spec"] = {{"hard", {{"pods", "1G"}}},
                     {"scopeSelector",
                      {{"matchExpressions",
                        {{{"scopeName", "PriorityClass"}, {"operator", "In"}, {"values", {pod.priority_class}}}}}}}};
    out.push_back(quota);
  }
  if (profiles) out.push_back(profiles_config_map(*profiles, ns, kGuardName));
  out.push_back(daemon_set(ns, image, port, o.containerd_state, pod, profiles));
  ordered_json service = manifest_object("v1", "Service", guard_metadata(kGuardName, ns));
  // Headless: each node's guard is a target of its own, never a balanced one.
  service["spec"] = {
      {"clusterIP", "None"},
      {"selector", app_labels(kGuardName)},
      {"ports", {{{"name", "metrics"}, {"port", port}, {"targetPort", "metrics"}, {"protocol", "TCP"}}}}};
  out.push_back(service);
  // The metrics name every tenant's pods: only the monitoring namespace may read them. The
  // kubelet's probes come from the node, which NetworkPolicy implementations admit.
  ordered_json policy = manifest_object("networking.k8s.io/v1", "NetworkPolicy", guard_metadata(kGuardName, ns));
  policy["spec"] = {
      {"podSelector", {{"matchLabels", app_labels(kGuardName)}}},
      {"policyTypes", {"Ingress"}},
      {"ingress",
       {{{"from",
          {{{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", o.monitoring_namespace}}}}}}}},
         {"ports", {{{"port", port}, {"protocol", "TCP"}}}}}}}};
  out.push_back(policy);
  if (!o.no_monitoring) {
    ordered_json monitor =
        manifest_object("monitoring.coreos.com/v1", "ServiceMonitor", guard_metadata(kGuardName, ns));
    monitor["spec"] = {{"selector", {{"matchLabels", app_labels(kGuardName)}}},
                       {"endpoints",
                        {{{"port", "metrics"},
                          {"path", "/metrics"},
                          {"interval", "15s"},
                          // The series' namespace, pod and container are the guarded pod's, not the guard's.
                          {"honorLabels", true},
                          {"relabelings",
                           {{{"sourceLabels", {"__meta_kubernetes_pod_node_name"}},
                             {"targetLabel", "node"},
                             {"action", "replace"}}}}}}}};
    out.push_back(monitor);
    out.push_back(guard_prometheus_rule(ns, o.runbook_url));
    ordered_json dashboard = manifest_object("v1", "ConfigMap", guard_metadata(kGuardDashboardConfigMap, ns));
    dashboard["metadata"]["labels"]["grafana_dashboard"] = "1";
    dashboard["data"] = {{"gpu-run-guard.json", guard_dashboard().dump() + "\n"}};
    out.push_back(dashboard);
  }
  add_object_labels(out, labels);
  return out;
}

std::string render_guard_manifests(const GuardManifestOptions& o, const ProfileTree* profiles) {
  const std::vector<ordered_json> objects = guard_manifests(o, profiles);
  const std::string tasks = o.containerd_state + "/" + kContainerdTaskDir;
  const std::string tolerated = tolerated_words(o);
  const bool quota = o.namespace_name != "kube-system" && is_critical_priority_class(o.priority_class);
  const std::string header =
      "# gpu-run's node guard in namespace " + o.namespace_name +
      " (gpu-run-ctl k8s guard-manifests): a DaemonSet running\n"
      "# `gpu-run-ctl guard --engine containerd` on " +
      (o.all_nodes ? std::string("every node")
                   : std::string("GPU nodes (") + kGpuPresentLabel + "=true, or " + kRuntimeNodeLabel + " set)") +
      ",\n# its metrics Service (port " + std::to_string(guard_port(o.port)) +
      ") that a NetworkPolicy opens to namespace " + o.monitoring_namespace + " only" +
      (o.no_monitoring
           ? ".\n"
           : ",\n# a ServiceMonitor and a PrometheusRule (prometheus-operator's CRDs), and a Grafana dashboard (a\n"
             "# ConfigMap labelled grafana_dashboard: \"1\").\n") +
      "# Tolerated: " + tolerated + ".\n# Priority " + o.priority_class +
      (quota ? ", admitted outside kube-system by the ResourceQuota gpu-run-guard-critical-pods" : "") + ".\n" +
      "# Optional: ConfigMaps gpu-run-guard-config (config.json: gpu-run-config(5)) and gpu-run-profiles" +
      (profiles ? std::string(" (here: --profiles, ") + std::to_string(profiles->size()) +
                      (profiles->size() == 1 ? " file)" : " files)")
                : std::string(" (gpu-run-ctl k8s guard-manifests --profiles DIR)")) +
      ".\n"
      "# What the guard's pod may do, and why:\n"
      "#   hostPID: containerd's init.pid holds host pids; the guard samples /proc/PID/root/dev/shm and\n"
      "#     joins /proc/PID/ns/mnt to grow it.\n"
      "#   SYS_PTRACE: to open another process's /proc/PID/root and ns/mnt.\n"
      "#   SYS_ADMIN, SYS_CHROOT: setns into the pod's mount namespace; the tmpfs resize (fspick, fsconfig).\n"
      "#   DAC_OVERRIDE: the remount child keeps exactly the hook's four capabilities and fails without it.\n"
      "#   runAsUser 0: a non-root process does not hold the capabilities. Not privileged.\n"
      "#   " +
      tasks +
      ", read-only: the tasks, watched with inotify. Not all of\n"
      "#     " +
      o.containerd_state +
      ": its containerd.sock is reachable through a read-only mount.\n"
      "#   " +
      kGuardRunDir +
      ", read-write: guard.lock (one guard a host), guard.alive (the node's doors plan learned\n"
      "#     profiles tight while it runs), guard.state (a restarted guard resumes), resize/ (turns with\n"
      "#     gpu-run-ctl resize).\n"
      "#   /dev/shm, read-only: the host's, which the remount compares with and never touches.\n"
      "#   seccomp RuntimeDefault (containerd 1.6 allows setns, fspick and fsconfig with SYS_ADMIN); AppArmor\n"
      "#     unconfined (the runtime's profile denies mount).\n";
  return render_manifest_stream(header, objects);
}

void add_k8s_guard_command(CLI::App& k8s) {
  auto o = std::make_shared<GuardManifestOptions>();
  CLI::App* cmd = k8s.add_subcommand(
      "guard-manifests",
      "Print the Kubernetes objects that run the node guard on GPU nodes: DaemonSet, Service, NetworkPolicy, "
      "ServiceMonitor, "
      "PrometheusRule, Grafana dashboard");
  add_namespace_and_image_options(*cmd, o->namespace_name, o->image, "the guard",
                                  "The guard's image (default: " + kDefaultGuardImage + ")");
  cmd->add_option("--port", o->port, "The metrics port of each node's guard")->type_name("N")->capture_default_str();
  cmd->add_option("--containerd-state", o->containerd_state,
                  "containerd's state directory on the nodes, whose tasks the guard watches")
      ->type_name("DIR")
      ->capture_default_str();
  add_placement_options(*cmd, *o, "the guard's");
  cmd->add_option("--label", o->labels,
                  "A label on every object, e.g. the one your Prometheus selects rules and monitors by (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_option("--monitoring-namespace", o->monitoring_namespace,
                  "The namespace of the Prometheus that scrapes the guards: the NetworkPolicy admits only its pods to "
                  "the metrics port")
      ->type_name("NS")
      ->capture_default_str();
  cmd->add_flag("--no-monitoring", o->no_monitoring,
                "No ServiceMonitor, PrometheusRule or dashboard (a cluster without prometheus-operator's CRDs)");
  cmd->add_option("--profiles", o->profiles_dir,
                  "The teams' profiles (NAME.json, TEAM/NAME.json) as the ConfigMap gpu-run-profiles, mounted as the "
                  "same tree; each is checked first")
      ->type_name("DIR");
  cmd->add_option("--runbook-url", o->runbook_url,
                  "docs/kubernetes.md as your team serves it: each alert's runbook_url is its section there")
      ->type_name("URL")
      ->capture_default_str();
  cmd->footer(
      "Apply with: gpu-run-ctl k8s guard-manifests ... | kubectl apply -f -\n"
      "The ServiceMonitor and PrometheusRule need prometheus-operator (else --no-monitoring); give them the label "
      "your Prometheus selects (--label release=NAME).\n"
      "Teams' profiles: --profiles DIR ships NAME.json and TEAM/NAME.json as the ConfigMap gpu-run-profiles, "
      "mounted at /etc/gpu-run/profiles.d as the same tree.");
  cmd->callback([o] { run_guard_manifests(*o); });
}

void run_guard_manifests(const GuardManifestOptions& o) {
  if (!o.profiles_dir) {
    std::cout << render_guard_manifests(o);
    return;
  }
  guard_manifests(o);  // the flags, before any profile is read
  const ProfileTree profiles = read_profile_tree(*o.profiles_dir, builtin_profile_dir());
  std::cout << render_guard_manifests(o, &profiles);
}

}  // namespace gpurun
