#!/usr/bin/env bash
# gpu-run-ctl k8s guard-manifests: packaging/kubernetes/gpu-run-guard.yaml is the command's output;
# bad flags are one line naming the flag, exit 2; kubectl reads every object (offline: `kubectl
# label --local`), of the defaults, of every flag changed, and of the placement flags with
# --no-monitoring; the Kubernetes Python client's models round-trip the core objects unchanged and
# the objects agree with each other (ports, names, the watched path, the quota's priority class);
# each alert's runbook_url is a section of docs/kubernetes.md; the PrometheusRule's groups pass
# `promtool check rules`, and `promtool test rules` fires each alert in one case and not in
# another: GpuRunShmFullCannotGrow for a pod at 95% whose growth was refused, not for one the guard
# just grew; GpuRunGuardDown after 5 minutes down, not before; GpuRunGuardNotOnEveryNode for a
# DaemonSet with a node short of an available pod, not for one whose every node has one;
# GpuRunGuardDaemonSetAbsent without kube-state-metrics' series, not with them. The Grafana
# dashboard is JSON whose every query is a PromQL expression promtool parses. Starts no guard.
# Usage: guard_manifests_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl next to it, or in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd kubectl jq promtool
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, yaml' 2>/dev/null ||
  it_skip "python3-kubernetes and python3-yaml are needed (scripts/install-deps installs them)"
it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl

work=$(it_tmpdir)
it_on_exit rm -rf "$work"

"$CTL" k8s guard-manifests >"$work/default.yaml"
assert_eq 0 "$?" "guard-manifests: exit 0"
assert_eq "" "$(diff "$work/default.yaml" "$here/../../packaging/kubernetes/gpu-run-guard.yaml")" \
  "packaging/kubernetes/gpu-run-guard.yaml is the output of guard-manifests"
"$CTL" k8s guard-manifests --namespace shm-guard --image example.test/guard:2 --port 9555 \
  --containerd-state /run/k3s/containerd --runbook-url https://wiki.example/gpu-run/kubernetes.html \
  >"$work/custom.yaml"
assert_eq 0 "$?" "guard-manifests with every flag: exit 0"
"$CTL" k8s guard-manifests --toleration all --toleration dedicated=gpu:NoExecute \
  --node-selector nvidia.com/gpu.present=true --image-pull-secret regcred --label release=kps \
  --priority-class gpu-agents --max-unavailable 25% --no-monitoring --all-nodes --monitoring-namespace obs \
  >"$work/placed.yaml"
assert_eq 0 "$?" "guard-manifests with the placement flags and --no-monitoring: exit 0"

for bad in "--namespace Bad_NS" "--image two\ words" "--port 0" "--port 65536" "--port nine" \
  "--containerd-state run/containerd" "--toleration x:Never" "--node-selector pool" \
  "--image-pull-secret Reg_Cred" "--label app.kubernetes.io/name=x" "--priority-class Bad" \
  "--max-unavailable 0%" "--runbook-url wiki" "--monitoring-namespace Obs_1"; do
  flag=${bad%% *}
  out=$(eval "\"\$CTL\" k8s guard-manifests $bad" 2>&1)
  rc=$?
  assert_eq "2 1" "$rc $(wc -l <<<"$out")" "$bad: exit 2, one line"
  assert_contains "$out" "$flag '" "...naming $flag"
done

for f in default custom placed; do
  kinds=$(kubectl label --local -f "$work/$f.yaml" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" |
    jq -r 'if .items then .items[].kind else .kind end' | tr '\n' ' ')
  want="Namespace ResourceQuota DaemonSet Service NetworkPolicy ServiceMonitor PrometheusRule ConfigMap "
  [[ $f == placed ]] && want="Namespace DaemonSet Service NetworkPolicy "
  assert_eq "$want" "$kinds" "$f: kubectl reads every object ($(head -c 200 "$work/kubectl.err"))"
done

cat >"$work/check.py" <<'PYEOF'
import json, re, sys
import yaml
from k8s_models import check, done, read_objects

MODELS = {"Namespace": "V1Namespace", "DaemonSet": "V1DaemonSet", "Service": "V1Service", "ConfigMap": "V1ConfigMap",
          "ResourceQuota": "V1ResourceQuota", "NetworkPolicy": "V1NetworkPolicy"}
path, variant, work, docs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ns, port, state = {"default": ("gpu-run-guard", 9477, "/run/containerd"),
                   "custom": ("shm-guard", 9555, "/run/k3s/containerd"),
                   "placed": ("gpu-run-guard", 9477, "/run/containerd")}[variant]
objs = read_objects(path, MODELS, variant)

# The anchors GitHub gives docs/kubernetes.md's headings (as scripts/check-docs computes them).
def slug(title):
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
sections = {slug(m.group(1).strip()) for m in re.finditer(r"^#{1,6}\s+(.*)$", open(docs).read(), re.M)}

if variant == "placed":
    pod = objs["DaemonSet"].spec.template.spec
    check([t.to_dict() for t in pod.tolerations] == [
        {"effect": None, "key": None, "operator": "Exists", "toleration_seconds": None, "value": None},
        {"effect": "NoExecute", "key": "dedicated", "operator": "Equal", "toleration_seconds": None, "value": "gpu"}],
        "placed: --toleration all tolerates every taint, and dedicated=gpu:NoExecute")
    check(pod.node_selector == {"nvidia.com/gpu.present": "true"} and pod.image_pull_secrets[0].name == "regcred"
          and pod.priority_class_name == "gpu-agents", "placed: nodeSelector, imagePullSecrets, priority class")
    check(objs["DaemonSet"].spec.update_strategy.rolling_update.max_unavailable == "25%", "placed: maxUnavailable 25%")
    check(all(o.metadata.labels.get("release") == "kps" for o in objs.values()), "placed: --label on every object")
    check("ResourceQuota" not in objs and "PrometheusRule" not in objs, "placed: no quota for its own class, no monitoring")
    check(pod.affinity is None, "placed: --all-nodes: no GPU-node affinity")
    check(objs["NetworkPolicy"].spec.ingress[0]._from[0].namespace_selector.match_labels
          == {"kubernetes.io/metadata.name": "obs"}, "placed: --monitoring-namespace obs is the one admitted")
    done()

quota = objs["ResourceQuota"].spec
check(quota.scope_selector.match_expressions[0].scope_name == "PriorityClass"
      and quota.scope_selector.match_expressions[0].values == [objs["DaemonSet"].spec.template.spec.priority_class_name]
      and quota.hard["pods"], variant + ": the ResourceQuota admits the DaemonSet's critical priority class")
check(objs["DaemonSet"].spec.update_strategy.rolling_update.max_unavailable == "10%",
      variant + ": a rollout stops 10% of the nodes' guards at once")

# The DaemonSet: only what the guard needs.
d = objs["DaemonSet"]
pod = d.spec.template.spec
c = pod.containers[0]
sc = c.security_context
check(pod.host_pid and not pod.host_network and not pod.host_ipc and pod.automount_service_account_token is False
      and pod.priority_class_name == "system-node-critical"
      and any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in pod.tolerations),
      variant + ": hostPID only, no token, system-node-critical, the GPU taint tolerated")
check(sc.privileged is False and sc.read_only_root_filesystem and sc.run_as_user == 0
      and sc.capabilities.drop == ["ALL"]
      and sorted(sc.capabilities.add) == ["DAC_OVERRIDE", "SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE"]
      and sc.seccomp_profile.type == "RuntimeDefault",
      variant + ": not privileged, read-only root, four capabilities, seccomp RuntimeDefault")
check(c.args == ["guard", "--engine", "containerd", "--containerd-state", state, "--metrics", "0.0.0.0:%d" % port,
                 "--metrics-public"], variant + ": runs gpu-run-ctl guard --engine containerd with public metrics")
host = {v.name: v.host_path for v in pod.volumes if v.host_path}
mounts = {m.name: m for m in c.volume_mounts}
tasks = state + "/io.containerd.runtime.v2.task"
check({n: (h.path, h.type) for n, h in host.items()} == {"containerd-tasks": (tasks, "Directory"),
                                                         "state": ("/run/gpu-run", "DirectoryOrCreate"),
                                                         "host-shm": ("/dev/shm", "Directory")},
      variant + ": host paths: containerd's tasks, /run/gpu-run, /dev/shm")
check(all(mounts[n].mount_path == host[n].path for n in host)
      and [n for n, m in mounts.items() if not m.read_only] == ["state"]
      and mounts["containerd-tasks"].mount_propagation == "HostToContainer",
      variant + ": each at its own path, read-only but /run/gpu-run, the tasks HostToContainer")
metrics_port = [p for p in c.ports if p.name == "metrics"][0]
check(metrics_port.container_port == port and c.liveness_probe.http_get.port == "metrics"
      and c.liveness_probe.http_get.path == "/healthz" and c.readiness_probe.http_get.port == "metrics"
      and c.readiness_probe.http_get.path == "/readyz",
      variant + ": liveness on the metrics port's /healthz, readiness on its /readyz")
check(c.resources.requests["memory"] and c.resources.limits["memory"] and c.resources.requests["cpu"],
      variant + ": resource requests and limits")
check(d.spec.selector.match_labels == d.spec.template.metadata.labels, variant + ": the selector selects its pods")

# Scraping: the Service selects the pods and names their port; the ServiceMonitor selects the Service.
svc = objs["Service"]
check(svc.spec.cluster_ip == "None" and svc.spec.selector == d.spec.template.metadata.labels
      and svc.spec.ports[0].port == port and svc.spec.ports[0].target_port == "metrics",
      variant + ": a headless Service for each node's guard")
mon = objs["ServiceMonitor"]
ep = mon["spec"]["endpoints"][0]
check(mon["spec"]["selector"]["matchLabels"] == svc.metadata.labels and ep["port"] == svc.spec.ports[0].name
      and ep["honorLabels"] is True and mon["metadata"]["namespace"] == ns,
      variant + ": the ServiceMonitor scrapes the Service's port, keeping the pods' labels")
groups = objs["PrometheusRule"]["spec"]["groups"]
down = [r for g in groups for r in g["rules"] if r["alert"] == "GpuRunGuardDown"][0]
version = sys.argv[5]
base = {"default": "https://github.com/gpu-run/gpu-run/blob/v%s/docs/kubernetes.md" % version,
        "custom": "https://wiki.example/gpu-run/kubernetes.html"}[variant]
for r in (r for g in groups for r in g["rules"]):
    url = r["annotations"]["runbook_url"]
    check(url == base + "#" + r["alert"].lower() and r["alert"].lower() in sections,
          "%s: %s's runbook_url is its section of docs/kubernetes.md (%s)" % (variant, r["alert"], url))
terms = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
check([(e.key, e.operator, e.values) for t in terms for e in t.match_expressions]
      == [("nvidia.com/gpu.present", "In", ["true"]), ("gpu-run.io/runtime", "Exists", None)] and len(terms) == 2,
      variant + ": on GPU nodes: nvidia.com/gpu.present=true OR gpu-run.io/runtime set (two terms, ORed)")
np = objs["NetworkPolicy"].spec
check(np.pod_selector.match_labels == d.spec.template.metadata.labels and np.policy_types == ["Ingress"]
      and len(np.ingress) == 1 and len(np.ingress[0]._from) == 1
      and np.ingress[0]._from[0].namespace_selector.match_labels == {"kubernetes.io/metadata.name": "monitoring"}
      and np.ingress[0]._from[0].pod_selector is None
      and [(p.port, p.protocol) for p in np.ingress[0].ports] == [(port, "TCP")],
      variant + ": the NetworkPolicy admits only namespace monitoring, to the metrics port")
check('job="%s"' % svc.metadata.name in down["expr"] and 'namespace="%s"' % ns in down["expr"],
      variant + ": GpuRunGuardDown watches the Service's job")
check(objs["Namespace"].metadata.labels.get("pod-security.kubernetes.io/enforce") == "privileged",
      variant + ": the namespace admits the guard's pod (Pod Security: privileged)")

# The rules for promtool; the dashboard's queries as recording rules, for promtool to parse.
cm = objs["ConfigMap"]
check(cm.metadata.labels.get("grafana_dashboard") == "1", variant + ": the dashboard's ConfigMap is labelled")
model = json.loads(cm.data["gpu-run-guard.json"])
exprs = [(p["title"], t["expr"]) for p in model["panels"] for t in p.get("targets", [])]
exprs += [(v["name"], re.sub(r"^label_values\((.*), *\w+\)$", r"\1", v["query"]))
          for v in model["templating"]["list"] if v["type"] == "query"]
check(len(model["panels"]) >= 5 and all(e.strip() for _, e in exprs),
      variant + ": the dashboard has %d panels and every query is non-empty" % len(model["panels"]))
grafana = {"$namespace": ".*", "$pod": ".*", "$__rate_interval": "1m"}
records = []
for i, (title, e) in enumerate(exprs):
    for var, value in grafana.items():
        e = e.replace(var, value)
    records.append({"record": "gpu_run:dashboard_query_%d" % i, "expr": e})
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}, open(work + "/" + variant + "-dashboard.yml", "w"))
yaml.safe_dump({"groups": groups}, open(work + "/" + variant + "-rules.yml", "w"))
# promtool test rules compares annotations too: the copy it tests carries none.
for g in groups:
    for r in g["rules"]:
        r.pop("annotations", None)
yaml.safe_dump({"groups": groups}, open(work + "/" + variant + "-rules-bare.yml", "w"))
done()
PYEOF
for f in default custom placed; do
  PYTHONPATH=$here "$PY" "$work/check.py" "$work/$f.yaml" "$f" "$work" "$here/../../docs/kubernetes.md" \
    "$("$CTL" --version | awk '{ print $2 }')" >"$work/$f.out" 2>&1
  rc=$?
  it_count_checks "$work/$f.out"
  assert_eq 0 "$rc" "$f: the model checks pass"
  [[ $f == placed ]] && continue
  out=$(promtool check rules "$work/$f-rules.yml" 2>&1)
  assert_eq 0 "$?" "$f: promtool check rules passes on the PrometheusRule's groups ($(tail -n 2 <<<"$out" | tr '\n' ' '))"
  out=$(promtool check rules "$work/$f-dashboard.yml" 2>&1)
  assert_eq 0 "$?" "$f: every dashboard query parses as PromQL ($(tail -n 2 <<<"$out" | tr '\n' ' '))"
done

# The alerts on synthetic series, 15 s apart: a pod at 95% whose growth was refused (the counter
# moves once, the gauge stays 1), and one at 95% the guard has just grown (growths moved, not
# blocked). The guard of node n2 is down for good. kube-state-metrics sees the DaemonSet want 3
# nodes: all 3 available here, 2 in the second test; the third has no kube-state-metrics series.
refused='namespace="ml",pod="refused",container="c0",node="n1"'
grown='namespace="ml",pod="grown",container="c0",node="n1"'
ksm='job="kube-state-metrics",namespace="gpu-run-guard",daemonset="gpu-run-guard"'
cat >"$work/rules_test.yml" <<EOF
rule_files: [default-rules-bare.yml]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
      - {series: 'gpu_run_shm_size_bytes{$refused}', values: '67108864x40'}
      - {series: 'gpu_run_shm_used_bytes{$refused}', values: '40000000 63753421x39'}
      - {series: 'gpu_run_shm_growths_total{$refused}', values: '0x40'}
      - {series: 'gpu_run_shm_growths_refused_total{$refused}', values: '0 1x39'}
      - {series: 'gpu_run_shm_growth_blocked{$refused}', values: '0 1x39'}
      - {series: 'gpu_run_shm_size_bytes{$grown}', values: '67108864 100663296x39'}
      - {series: 'gpu_run_shm_used_bytes{$grown}', values: '40000000 95630131x39'}
      - {series: 'gpu_run_shm_growths_total{$grown}', values: '0 1x39'}
      - {series: 'gpu_run_shm_growths_refused_total{$grown}', values: '0x40'}
      - {series: 'gpu_run_shm_growth_blocked{$grown}', values: '0x40'}
      - {series: 'up{job="gpu-run-guard",namespace="gpu-run-guard",node="n1",pod="gpu-run-guard-a"}', values: '1x40'}
      - {series: 'up{job="gpu-run-guard",namespace="gpu-run-guard",node="n2",pod="gpu-run-guard-b"}', values: '0x40'}
      - {series: 'kube_daemonset_status_desired_number_scheduled{$ksm}', values: '3x100'}
      - {series: 'kube_daemonset_status_number_available{$ksm}', values: '3x100'}
    alert_rule_test:
      - eval_time: 0s
        alertname: GpuRunShmFullCannotGrow
      - eval_time: 1m
        alertname: GpuRunShmFullCannotGrow
        exp_alerts:
          - exp_labels: {severity: warning, namespace: ml, pod: refused, container: c0, node: n1}
      - eval_time: 4m
        alertname: GpuRunGuardDown
      - eval_time: 6m
        alertname: GpuRunGuardDown
        exp_alerts:
          - exp_labels: {severity: warning, job: gpu-run-guard, namespace: gpu-run-guard, node: n2, pod: gpu-run-guard-b}
      - eval_time: 20m
        alertname: GpuRunGuardNotOnEveryNode
      - eval_time: 20m
        alertname: GpuRunGuardDaemonSetAbsent
  - interval: 1m
    input_series:
      - {series: 'kube_daemonset_status_desired_number_scheduled{$ksm}', values: '3x30'}
      - {series: 'kube_daemonset_status_number_available{$ksm}', values: '2x30'}
    alert_rule_test:
      - eval_time: 10m
        alertname: GpuRunGuardNotOnEveryNode
      - eval_time: 20m
        alertname: GpuRunGuardNotOnEveryNode
        exp_alerts:
          - exp_labels: {severity: warning, job: kube-state-metrics, namespace: gpu-run-guard, daemonset: gpu-run-guard}
  - interval: 1m
    input_series:
      - {series: 'up{job="gpu-run-guard",namespace="gpu-run-guard",node="n1",pod="gpu-run-guard-a"}', values: '1x30'}
    alert_rule_test:
      - eval_time: 10m
        alertname: GpuRunGuardDaemonSetAbsent
      - eval_time: 20m
        alertname: GpuRunGuardDaemonSetAbsent
        exp_alerts:
          - exp_labels: {severity: warning, namespace: gpu-run-guard, daemonset: gpu-run-guard}
EOF
out=$(cd "$work" && promtool test rules rules_test.yml 2>&1)
assert_eq 0 "$?" "promtool test rules: each alert fires in its case and not in the other (GpuRunShmFullCannotGrow for the refused pod only, GpuRunGuardDown for n2 after 5m, GpuRunGuardNotOnEveryNode for 2 of 3 nodes after 15m, GpuRunGuardDaemonSetAbsent without kube-state-metrics after 15m)"
[[ $IT_FAILED -eq 0 ]] || printf '%s\n' "$out"

it_done
