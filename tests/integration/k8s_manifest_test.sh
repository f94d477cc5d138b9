#!/usr/bin/env bash
# gpu-run-ctl k8s -f against the real gpu-run-webhook: a manifest of workloads (a Pod with a 32Gi
# limit, a Deployment, a PyTorchJob, a TFJob, a StatefulSet with a sidecar and an init container,
# a CronJob, a Job, a DaemonSet and a ReplicaSet the webhook leaves alone, a ConfigMap and a
# Service) is sized by k8s -f, as YAML and as a JSON List; every pod template of it is also sent
# to gpu-run-webhook over TLS as a Pod and its JSONPatch applied with python3-jsonpatch; the two
# must be equal, template by template. The output is the same byte for byte under `taskset -c 0`
# and on all CPUs, objects without a template are printed as they were (comments included),
# kubectl reads every object back and the Kubernetes Python client's models round-trip the core
# kinds; the RuntimeClass (k8s runtimeclass) schedules onto labelled nodes and round-trips too; bad
# input is one line, exit 2, nothing on stdout.
# Usage: k8s_manifest_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl and gpu-run-webhook next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd kubectl jq openssl taskset
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, jsonpatch, yaml' 2>/dev/null ||
  it_skip "python3-kubernetes, python3-jsonpatch and python3-yaml are needed (scripts/install-deps installs them)"
it_binaries "${1:-}" gpu-run-ctl gpu-run-webhook
CTL=$IT_BIN/gpu-run-ctl
work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_isolate_config "$work"

# admission_test's webtest profile (4 MiB batches, 2 workers a GPU, 64 MiB NCCL) and the built-in
# imagenet (workers from the pod's CPUs). Pods in namespace ml that name no profile get webtest:
# the webhook's namespace_profiles, k8s -f's --profile.
mkdir -p "$work/profiles"
cat >"$work/profiles/webtest.json" <<'JSON'
{"name": "webtest", "extends": null,
 "fields": [{"name": "x", "shape": [1048576], "dtype": "uint8"}],
 "batch_size": 4, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true,
 "headroom": 1.0, "nccl_reserve": "64m", "min_shm": "1m", "max_shm": "1g"}
JSON
printf '{"namespace_profiles": {"ml": "webtest"}}\n' >"$work/webhook.json"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/tls.key" -out "$work/tls.crt" -days 1 -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1 || it_die "openssl req failed"
"$IT_BIN/gpu-run-webhook" --listen 127.0.0.1:0 --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
  --profile-dir "$work/profiles" --config "$work/webhook.json" 2>"$work/webhook.err" &
wpid=$!
stop_webhook() { kill -9 "$wpid" 2>/dev/null || true; }
it_on_exit stop_webhook
wport=$(it_webhook_port "$work/webhook.err") || it_die "the webhook did not start: $(cat "$work/webhook.err")"

# The workloads: written as YAML (with comments and a hand-written head) and as a JSON List.
cat >"$work/objects.py" <<'PYEOF'
import json, sys
import yaml

def c(name, limits=None, requests=None, **kw):
    out = {"name": name, "image": "example.test/%s:1" % name}
    if limits or requests:
        out["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    out.update(kw)
    return out

def tmpl(containers, annotations=None, **spec):
    t = {"spec": dict(containers=containers, **spec)}
    if annotations:
        t["metadata"] = {"labels": {"app": "x"}, "annotations": annotations}
    return t

imagenet = {"gpu-run.profile": "imagenet"}
webtest = {"gpu-run.profile": "webtest"}
objects = [
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "train", "namespace": "ml", "annotations": imagenet},
     "spec": {"containers": [c("pytorch", {"memory": "32Gi", "nvidia.com/gpu": "2", "cpu": "16"},
                               env=[{"name": "EPOCHS", "value": "90"}])]}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "ml"},
     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}},
              "template": tmpl([c("server", {"nvidia.com/gpu": 1, "memory": "8Gi"}, {"memory": "4Gi"})],
                               {"gpu-run.profile": "webtest", "gpu-run.workers": "3"})}},
    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
     "spec": {"pytorchReplicaSpecs": {
         "Master": {"replicas": 1, "template": tmpl([c("pytorch", {"nvidia.com/gpu": 1, "memory": "16Gi", "cpu": 8})],
                                                    imagenet)},
         "Worker": {"replicas": 3, "template": tmpl([c("pytorch", {"nvidia.com/gpu": 4, "memory": "64Gi", "cpu": "32"})])}}}},
    {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "resnet", "namespace": "ml"},
     "spec": {"tfReplicaSpecs": {"Chief": {"template": tmpl([c("tensorflow", {"nvidia.com/gpu": "1"})], webtest)},
                                 "PS": {"replicas": 1}}}},
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "two", "namespace": "ml"},
     "spec": {"serviceName": "two", "selector": {"matchLabels": {"app": "x"}},
              "template": tmpl([c("trainer-a", {"nvidia.com/gpu": "2", "memory": "16Gi"}), c("log-shipper"),
                                c("trainer-b", {"nvidia.com/gpu": "1", "memory": "16Gi"})], webtest,
                               initContainers=[c("fetch")])}},
    {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "ml"},
     "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": tmpl(
         [c("train", {"nvidia.com/gpu": "1"})], {"gpu-run.shm-size": "1g"}, restartPolicy="Never")}}}},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "notebook", "namespace": "ml"},
     "spec": {"template": tmpl([c("notebook", {"memory": "8Gi", "cpu": 0.5})], webtest, restartPolicy="Never")}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "exporter", "namespace": "ml"},
     "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": tmpl([c("exporter", {"cpu": "100m"})])}},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "own-shm", "namespace": "ml"},
     "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": tmpl(
         [c("t", {"nvidia.com/gpu": "1"}, volumeMounts=[{"name": "mine", "mountPath": "/dev/shm"}])], webtest,
         volumes=[{"name": "mine", "emptyDir": {"medium": "Memory"}}])}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "infer", "namespace": "ml"},
     "spec": {"ports": [{"port": 80}]}},
]
head = ("# the team's workloads (k8s_manifest_test)\n"
        "apiVersion: v1\nkind: ConfigMap   # no pod template: printed as it was\n"
        "metadata: {name: settings, namespace: ml}\ndata:\n  lr: \"0.1\"\n")
with open(sys.argv[1] + "/manifest.yaml", "w") as f:
    f.write(head + "---\n" + yaml.safe_dump_all(objects, sort_keys=False))
with open(sys.argv[1] + "/manifest.json", "w") as f:
    json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, f, indent=2)
PYEOF
"$PY" "$work/objects.py" "$work" || it_die "cannot write the manifests"

sized() {  # sized OUT INPUT [taskset args...]: k8s -f INPUT with the test's profiles
  local out=$1 in=$2
  shift 2
  "$@" "$CTL" k8s -f "$in" --profile webtest --profile-dir "$work/profiles" >"$out" 2>"$out.err"
}
sized "$work/out.yaml" "$work/manifest.yaml"
assert_eq 0 "$?" "k8s -f manifest.yaml: exit 0 ($(head -c 300 "$work/out.yaml.err"))"
sized "$work/out.json" "$work/manifest.json"
assert_eq 0 "$?" "k8s -f manifest.json: exit 0 ($(head -c 300 "$work/out.json.err"))"
sized "$work/out-cpu0.yaml" "$work/manifest.yaml" taskset -c 0
assert_eq "" "$(cmp "$work/out.yaml" "$work/out-cpu0.yaml" 2>&1)" \
  "the same bytes under taskset -c 0 ($(nproc --all) CPUs here): workers come from the pods' CPUs"
"$CTL" k8s -f - --profile webtest --profile-dir "$work/profiles" <"$work/manifest.yaml" >"$work/out-stdin.yaml" 2>/dev/null
assert_eq "" "$(cmp "$work/out.yaml" "$work/out-stdin.yaml" 2>&1)" "-f - reads the manifest from stdin"
it_log "$(cat "$work/out.yaml.err")"

cat >"$work/compare.py" <<'PYEOF'
import base64, copy, json, ssl, sys, urllib.request
import jsonpatch, yaml
sys.path.insert(0, sys.argv[4])
from k8s_models import check, done

work, port, cafile = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)

def review(pod):
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "ml", "operation": "CREATE", "object": pod}}
    req = urllib.request.Request("https://127.0.0.1:%s/mutate" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    resp = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))["response"]
    if "patch" not in resp:
        return pod, False
    return jsonpatch.apply_patch(pod, json.loads(base64.b64decode(resp["patch"]))), True

def templates(obj):
    """(name, template dict) of each pod template, as the test knows where each kind keeps them."""
    kind = obj["kind"]
    if kind == "Pod":
        yield "Pod", obj
    elif kind == "CronJob":
        yield "CronJob", obj["spec"]["jobTemplate"]["spec"]["template"]
    elif kind.endswith("Job") and obj["apiVersion"].startswith("kubeflow.org/"):
        for key, roles in obj["spec"].items():
            if key.endswith("ReplicaSpecs"):
                for role, r in roles.items():
                    if "template" in r:
                        yield kind + "/" + role, r["template"]
    elif "template" in obj.get("spec", {}):
        yield kind, obj["spec"]["template"]

def pod_of(t):
    if t.get("kind") == "Pod":
        return copy.deepcopy(t)
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": copy.deepcopy(t["spec"])}
    if "metadata" in t:
        pod["metadata"] = copy.deepcopy(t["metadata"])
    return pod

src = json.load(open(work + "/manifest.json"))["items"]
yaml_out = [d for d in yaml.safe_load_all(open(work + "/out.yaml")) if d is not None]
json_out = json.load(open(work + "/out.json"))
check(yaml_out[0] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "ml"},
                      "data": {"lr": "0.1"}}, "the ConfigMap passes through")
check(json_out["kind"] == "List" and len(json_out["items"]) == len(src), "JSON in, a JSON List out")
check(yaml_out[1:] == json_out["items"], "the YAML and the JSON output hold the same objects")
patched_count = 0
for before, after in zip(src, json_out["items"]):
    pairs = list(zip(templates(before), templates(after)))
    if not pairs:
        check(before == after, "%s %s: no pod template, unchanged" % (before["kind"], before["metadata"]["name"]))
    for (what, t_in), (_, t_out) in pairs:
        expected, patched = review(pod_of(t_in))
        got = pod_of(t_out)
        # Each door names itself in the pod's decision record; everything else is the same.
        for pod, door in ((expected, "gpu-run-webhook"), (got, "gpu-run-ctl k8s")):
            record = pod.get("metadata", {}).get("annotations", {}).get("gpu-run.decision")
            if record is not None:
                record = json.loads(record)
                check(record["door"] == door, "%s %s: the record names its door, %s" % (what, before["metadata"]["name"], door))
                record["door"] = "a door"
                pod["metadata"]["annotations"]["gpu-run.decision"] = json.dumps(record)
            # ...and again in each sized container's GPU_RUN_DECISION, the same record.
            for c in pod.get("spec", {}).get("containers", []) + pod.get("spec", {}).get("initContainers", []):
                for e in c.get("env", []):
                    if e.get("name") == "GPU_RUN_DECISION":
                        in_env = json.loads(e["value"])
                        check(in_env["door"] == door and record is not None and
                              dict(in_env, door="a door") == record,
                              "%s %s: GPU_RUN_DECISION is the pod's record" % (what, before["metadata"]["name"]))
                        e["value"] = json.dumps(dict(in_env, door="a door"))
        name = "%s %s" % (what, before["metadata"]["name"])
        check(got == expected, name + ": k8s -f's template is the webhook's patch of the same pod" +
              ("" if got == expected else ": %s != %s" % (json.dumps(got)[:400], json.dumps(expected)[:400])))
        patched_count += patched
        if patched:
            vols = [v for v in got["spec"]["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
            check(len(vols) == 1 and any(m["mountPath"] == "/dev/shm" for c in got["spec"]["containers"]
                                         for m in c.get("volumeMounts", [])), name + ": /dev/shm mounted")
    # Everything but the templates as it was.
    rest_in, rest_out = copy.deepcopy(before), copy.deepcopy(after)
    for (_, t_in), (_, t_out) in zip(templates(rest_in), templates(rest_out)):
        t_in.clear(), t_out.clear()
    check(rest_in == rest_out, "%s %s: the object around its templates unchanged" % (before["kind"], before["metadata"]["name"]))
check(patched_count == 8, "8 templates sized; the DaemonSet (no request) and the ReplicaSet (its own /dev/shm) left "
      "alone (%d)" % patched_count)

pod = json_out["items"][0]["spec"]["containers"][0]
mem = pod["resources"]["limits"]["memory"]
units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
check(mem[-2:] in units and int(mem[:-2]) * units[mem[-2:]] >= 32 << 30, "the Pod's 32Gi limit stays at least 32Gi: " + mem)

# The core kinds through the Python client's models: nothing unknown or misspelled. A quantity the
# manifest wrote as a number (cpu: 0.5) comes back as the model's string.
MODELS = {"Pod": "V1Pod", "Deployment": "V1Deployment", "StatefulSet": "V1StatefulSet", "CronJob": "V1CronJob",
          "Job": "V1Job", "DaemonSet": "V1DaemonSet", "ReplicaSet": "V1ReplicaSet", "Service": "V1Service",
          "ConfigMap": "V1ConfigMap"}

def quantities(v):
    if isinstance(v, dict):
        return {k: ({q: str(n) for q, n in x.items()} if k in ("limits", "requests") and isinstance(x, dict)
                    else quantities(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [quantities(x) for x in v]
    return v

class Response:
    def __init__(self, data):
        self.data = json.dumps(data)

for doc in yaml_out:
    if doc["kind"] in MODELS:
        from kubernetes import client
        api = client.ApiClient()
        obj = api.deserialize(Response(doc), MODELS[doc["kind"]])
        check(api.sanitize_for_serialization(obj) == quantities(doc),
              "%s %s round-trips through %s" % (doc["kind"], doc["metadata"]["name"], MODELS[doc["kind"]]))
done()
PYEOF
"$PY" "$work/compare.py" "$work" "$wport" "$work/tls.crt" "$here" >"$work/compare.out" 2>&1
rc=$?
cat "$work/compare.out"
it_count_checks "$work/compare.out"
assert_eq 0 "$rc" "k8s -f and the webhook agree on every template"

assert_eq "# the team's workloads (k8s_manifest_test)
apiVersion: v1
kind: ConfigMap   # no pod template: printed as it was" "$(head -n 3 "$work/out.yaml")" \
  "an object without a pod template is printed byte for byte, comments included"
kinds=$(kubectl label --local -f "$work/out.yaml" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" |
  jq -r 'if .items then .items[].kind else .kind end' | tr '\n' ' ')
assert_eq "ConfigMap Pod Deployment PyTorchJob TFJob StatefulSet CronJob Job DaemonSet ReplicaSet Service " "$kinds" \
  "kubectl reads every object of the output ($(head -c 200 "$work/kubectl.err"))"
assert_eq "" "$(cmp <("$CTL" k8s -f "$work/out.yaml" --profile webtest --profile-dir "$work/profiles" 2>/dev/null) \
  "$work/out.yaml" 2>&1)" "a second k8s -f changes nothing (the webhook's /dev/shm is found)"

# The RuntimeClass schedules onto the nodes configure containerd tells to label.
"$CTL" k8s runtimeclass --handler gpu-run-b >"$work/rc.yaml"
assert_eq RuntimeClass "$(kubectl label --local -f "$work/rc.yaml" gpu-run.io/checked=yes -o json 2>&1 | jq -r .kind)" \
  "kubectl reads the RuntimeClass"
"$PY" - "$work/rc.yaml" "$here" >"$work/rc.out" 2>&1 <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[2])
from k8s_models import check, done, read_objects
rc = read_objects(sys.argv[1], {"RuntimeClass": "V1RuntimeClass"}, "runtimeclass")["RuntimeClass"]
check(rc.handler == "gpu-run-b" and rc.scheduling.node_selector == {"gpu-run.io/runtime": "gpu-run-b"},
      "the RuntimeClass's pods go only to nodes labelled gpu-run.io/runtime=gpu-run-b")
done()
PYEOF
assert_eq 0 "$?" "the RuntimeClass checks pass ($(tail -n 3 "$work/rc.out" | tr '\n' ' '))"
it_count_checks "$work/rc.out"

# Bad input: one line, exit 2, nothing printed.
sed 's/gpu-run.profile: imagenet/gpu-run.profile: no-such-profile/' "$work/manifest.yaml" >"$work/denied.yaml"
for args in "-f $work/denied.yaml" "-f $work/missing.yaml" "" "--profile imagenet --gpus 2 --container pytorch" \
  "-f $work/manifest.yaml --profile ../etc/x" "-f $work/manifest.yaml --profile no-such-profile"; do
  # shellcheck disable=SC2086
  "$CTL" k8s $args --profile-dir "$work/profiles" >"$work/bad.out" 2>"$work/bad.err" </dev/null
  rc=$?
  assert_eq "2 1 0" "$rc $(wc -l <"$work/bad.err") $(wc -c <"$work/bad.out")" \
    "k8s $args: exit 2, one line, no output ($(head -c 240 "$work/bad.err"))"
done
"$CTL" k8s -f "$work/denied.yaml" 2>&1 >/dev/null | grep -q "denied.yaml:.*Pod ml/train: .*no-such-profile"
assert_eq 0 "$?" "a template the webhook would deny is named with its file and line"

it_done
