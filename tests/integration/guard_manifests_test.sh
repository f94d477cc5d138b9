#!/usr/bin/env bash
# gpu-run-ctl k8s guard-manifests: packaging/kubernetes/gpu-run-guard.yaml is the command's output;
# bad flags are one line naming the flag, exit 2; kubectl reads every object (offline: `kubectl
# label --local`); the Kubernetes Python client's models round-trip the core objects unchanged and
# the objects agree with each other (ports, names, the watched path); the PrometheusRule's groups
# pass `promtool check rules`, and `promtool test rules` fires GpuRunShmFullCannotGrow for a pod at
# 95% whose growth was refused but not for one at 95% that the guard just grew; the Grafana
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
  --containerd-state /run/k3s/containerd >"$work/custom.yaml"
assert_eq 0 "$?" "guard-manifests with every flag: exit 0"

for bad in "--namespace Bad_NS" "--image two\ words" "--port 0" "--port 65536" "--port nine" \
  "--containerd-state run/containerd"; do
  flag=${bad%% *}
  out=$(eval "\"\$CTL\" k8s guard-manifests $bad" 2>&1)
  rc=$?
  assert_eq "2 1" "$rc $(wc -l <<<"$out")" "$bad: exit 2, one line"
  assert_contains "$out" "$flag '" "...naming $flag"
done

for f in default custom; do
  kinds=$(kubectl label --local -f "$work/$f.yaml" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" |
    jq -r 'if .items then .items[].kind else .kind end' | tr '\n' ' ')
  assert_eq "Namespace DaemonSet Service ServiceMonitor PrometheusRule ConfigMap " "$kinds" \
    "$f: kubectl reads every object ($(head -c 200 "$work/kubectl.err"))"
done

cat >"$work/check.py" <<'PYEOF'
import json, re, sys
import yaml
from k8s_models import check, done, read_objects

MODELS = {"Namespace": "V1Namespace", "DaemonSet": "V1DaemonSet", "Service": "V1Service", "ConfigMap": "V1ConfigMap"}
path, variant, work = sys.argv[1], sys.argv[2], sys.argv[3]
ns, port, state = {"default": ("gpu-run-guard", 9477, "/run/containerd"),
                   "custom": ("shm-guard", 9555, "/run/k3s/containerd")}[variant]
objs = read_objects(path, MODELS, variant)

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
for f in default custom; do
  PYTHONPATH=$here "$PY" "$work/check.py" "$work/$f.yaml" "$f" "$work" >"$work/$f.out" 2>&1
  rc=$?
  it_count_checks "$work/$f.out"
  assert_eq 0 "$rc" "$f: the model checks pass"
  out=$(promtool check rules "$work/$f-rules.yml" 2>&1)
  assert_eq 0 "$?" "$f: promtool check rules passes on the PrometheusRule's groups ($(tail -n 2 <<<"$out" | tr '\n' ' '))"
  out=$(promtool check rules "$work/$f-dashboard.yml" 2>&1)
  assert_eq 0 "$?" "$f: every dashboard query parses as PromQL ($(tail -n 2 <<<"$out" | tr '\n' ' '))"
done

# The alert on synthetic series, 15 s apart: a pod at 95% whose growth was refused (the counter moves
# once, the gauge stays 1), and one at 95% the guard has just grown (growths moved, not blocked).
# The guard of node n2 is down for good.
refused='namespace="ml",pod="refused",container="c0",node="n1"'
grown='namespace="ml",pod="grown",container="c0",node="n1"'
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
EOF
out=$(cd "$work" && promtool test rules rules_test.yml 2>&1)
assert_eq 0 "$?" "promtool test rules: GpuRunShmFullCannotGrow fires for the refused pod only, GpuRunGuardDown for n2"
[[ $IT_FAILED -eq 0 ]] || printf '%s\n' "$out"

it_done
