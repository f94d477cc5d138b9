#!/usr/bin/env bash
# gpu-run-ctl k8s webhook-manifests: both certificate set-ups read back by kubectl (offline:
# `kubectl label --local` decodes every object) and by the Kubernetes Python client's models
# (each object deserialized and serialized back unchanged, so no field is unknown or
# misspelled; the two fields newer than Debian's python3-kubernetes, the PDB's
# unhealthyPodEvictionPolicy and the webhook's matchConditions, against Kubernetes' OpenAPI schema
# in tests/data/kubernetes); cert-manager's objects against cert-manager's CRD schemas
# (tests/data/cert-manager, python3-jsonschema, unknown fields refused) and as one CA chain; the
# Deployment's config checksum is webhook.json's sha256 and --config changes it; each alert's
# runbook_url is a section of docs/kubernetes.md, promtool checks the rules and `promtool test
# rules` fires GpuRunWebhookFailingOpen and GpuRunWebhookRejectingPods in one case and not in
# another; packaging/kubernetes/gpu-run-webhook.yaml is the command's output; the --self-signed
# pair serves real TLS for the Service's name with the caBundle as the only trust.
# Usage: webhook_manifests_test.sh [PATH/TO/gpu-run]   (the other binaries next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd kubectl jq promtool
it_log "kubectl: $(kubectl version --client 2>/dev/null | head -n 1)"
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, yaml, jsonschema' 2>/dev/null ||
  it_skip "python3-kubernetes, python3-yaml and python3-jsonschema are needed (scripts/install-deps installs them)"

bin_dir=${GPU_RUN_BIN_DIR:-}
[[ -z $bin_dir && -n ${1:-} ]] && bin_dir=$(dirname "$1")
[[ -z $bin_dir ]] && bin_dir=$here/../../build/release/bin
CTL=$bin_dir/gpu-run-ctl
WEBHOOK=$bin_dir/gpu-run-webhook
[[ -x $CTL && -x $WEBHOOK ]] || it_skip "gpu-run-ctl or gpu-run-webhook not found in $bin_dir"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"

"$CTL" k8s webhook-manifests --cert-manager >"$work/cm.yaml"
assert_eq 0 "$?" "--cert-manager: exit 0"
printf '{"policy": "deny", "namespace_profiles": {"ml": "imagenet"}}\n' >"$work/webhook.json"
"$CTL" k8s webhook-manifests --cert-manager --config "$work/webhook.json" --apiserver-cidr 10.0.0.0/28 \
  --label release=kps --no-monitoring >"$work/cm-config.yaml"
assert_eq 0 "$?" "--cert-manager --config --apiserver-cidr --label --no-monitoring: exit 0"
for bad in "--config $work/missing.json" "--apiserver-cidr 10.0.0.0" "--label a" "--runbook-url x"; do
  # shellcheck disable=SC2086
  out=$("$CTL" k8s webhook-manifests --cert-manager $bad 2>&1)
  assert_eq "2 1" "$? $(wc -l <<<"$out")" "$bad: exit 2, one line ($out)"
done
printf '{"polcy": "deny"}\n' >"$work/bad.json"
out=$("$CTL" k8s webhook-manifests --cert-manager --config "$work/bad.json" 2>&1)
assert_eq 2 "$?" "a --config the webhook would refuse: exit 2"
assert_contains "$out" "unknown key" "...saying why"
"$CTL" k8s webhook-manifests --self-signed "$work/tls" --namespace shm-test --image example.test/webhook:1 \
  >"$work/ss.yaml"
assert_eq 0 "$?" "--self-signed DIR: exit 0"
assert_eq "600" "$(stat -c %a "$work/tls/tls.key")" "the serving key is written mode 0600"
"$CTL" k8s webhook-manifests --self-signed "$work/tls" --namespace shm-test --image example.test/webhook:1 \
  >"$work/ss2.yaml"
assert_eq "" "$(diff "$work/ss.yaml" "$work/ss2.yaml")" "a second run reuses the pair in DIR (same output)"
out=$("$CTL" k8s webhook-manifests --self-signed "$work/tls" --namespace other 2>&1)
assert_eq 2 "$?" "the pair in DIR for another namespace: exit 2"
assert_contains "$out" "tls.crt is not for gpu-run-webhook.other.svc" "...saying why"
out=$("$CTL" k8s webhook-manifests 2>&1)
assert_eq 2 "$?" "no certificate set-up: exit 2"
out=$("$CTL" k8s webhook-manifests --cert-manager --namespace Bad 2>&1)
assert_eq 2 "$?" "a bad namespace: exit 2"
assert_contains "$out" "--namespace 'Bad'" "...naming the flag"

assert_eq "" "$(diff "$work/cm.yaml" "$here/../../packaging/kubernetes/gpu-run-webhook.yaml")" \
  "packaging/kubernetes/gpu-run-webhook.yaml is the output of webhook-manifests --cert-manager"

for f in cm ss cm-config; do
  kinds=$(kubectl label --local -f "$work/$f.yaml" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" |
    jq -r 'if .items then .items[].kind else .kind end' | tr '\n' ' ')
  case $f in
    cm) want="Namespace ConfigMap Issuer Certificate Issuer Certificate Deployment Service PodDisruptionBudget NetworkPolicy MutatingWebhookConfiguration PrometheusRule " ;;
    ss) want="Namespace ConfigMap Secret Deployment Service PodDisruptionBudget NetworkPolicy MutatingWebhookConfiguration PrometheusRule " ;;
    cm-config) want="Namespace ConfigMap Issuer Certificate Issuer Certificate Deployment Service PodDisruptionBudget NetworkPolicy MutatingWebhookConfiguration " ;;
  esac
  assert_eq "$want" "$kinds" "$f: kubectl reads every object ($(head -c 200 "$work/kubectl.err"))"
done

cat >"$work/models.py" <<'PYEOF'
import base64, copy, hashlib, json, re, sys
import jsonschema, yaml
from k8s_models import check, done, read_objects

MODELS = {"Namespace": "V1Namespace", "ConfigMap": "V1ConfigMap", "Secret": "V1Secret", "Deployment": "V1Deployment",
          "Service": "V1Service", "PodDisruptionBudget": "V1PodDisruptionBudget", "NetworkPolicy": "V1NetworkPolicy",
          "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration"}
path, variant, tls_dir, data, docs, version = sys.argv[1:7]
docs_all = [d for d in yaml.safe_load_all(open(path)) if d]

# Debian's python3-kubernetes (22.6) knows the Kubernetes 1.22 API: the two newer fields are checked
# against Kubernetes' OpenAPI schema, then left out of the models' round trip.
newer = json.load(open(data + "/kubernetes/openapi-v3-newer-fields.json"))
def k8s_schema(name):
    return {"$defs": newer["$defs"], "$ref": "#/$defs/" + name}
strict = json.loads(json.dumps(newer))  # unknown fields refused in the two types, as kubectl's strict validation does
for d in strict["$defs"].values():
    d["additionalProperties"] = False
pdb = [d for d in docs_all if d["kind"] == "PodDisruptionBudget"][0]
mwc = [d for d in docs_all if d["kind"] == "MutatingWebhookConfiguration"][0]
try:
    jsonschema.validate(pdb["spec"], {"$defs": strict["$defs"], "$ref": "#/$defs/io.k8s.api.policy.v1.PodDisruptionBudgetSpec"})
    for hook in mwc["webhooks"]:
        jsonschema.validate(hook, {"$defs": strict["$defs"], "$ref": "#/$defs/io.k8s.api.admissionregistration.v1.MutatingWebhook"})
    check(True, variant + ": the PDB's spec and the webhook validate against Kubernetes' OpenAPI schema")
except jsonschema.ValidationError as e:
    check(False, variant + ": Kubernetes' OpenAPI schema: " + e.message)
check(pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow",
      variant + ": a crash-looping replica never blocks a node drain (unhealthyPodEvictionPolicy AlwaysAllow)")
cond = mwc["webhooks"][0]["matchConditions"]
check(len(cond) == 1 and "gpu-run." in cond[0]["expression"] and "nvidia.com/gpu" in cond[0]["expression"],
      variant + ": matchConditions send only pods that ask or request nvidia.com/gpu")
bad_pdb = dict(pdb["spec"], unhealthyPodEvictionPolicy="Sometimes")
try:
    jsonschema.validate(bad_pdb, {"$defs": strict["$defs"], "$ref": "#/$defs/io.k8s.api.policy.v1.PodDisruptionBudgetSpec"})
    check(False, variant + ": the schema refuses a policy Kubernetes does not have")
except jsonschema.ValidationError:
    check(True, variant + ": the schema refuses a policy Kubernetes does not have")
stripped = []
for d in docs_all:
    d = copy.deepcopy(d)
    if d["kind"] == "PodDisruptionBudget":
        del d["spec"]["unhealthyPodEvictionPolicy"]
    if d["kind"] == "MutatingWebhookConfiguration":
        for hook in d["webhooks"]:
            del hook["matchConditions"]
    stripped.append(d)
yaml.safe_dump_all(stripped, open(path + ".models.yaml", "w"))
objs = read_objects(path + ".models.yaml", MODELS, variant)

ns = "shm-test" if variant == "ss" else "gpu-run"
d = objs["Deployment"]
pod = d.spec.template.spec
c = pod.containers[0]
check(d.spec.replicas == 2 and pod.security_context.run_as_non_root and pod.security_context.run_as_user == 65532
      and pod.security_context.seccomp_profile.type == "RuntimeDefault"
      and c.security_context.read_only_root_filesystem and c.security_context.capabilities.drop == ["ALL"]
      and c.security_context.allow_privilege_escalation is False,
      variant + ": 2 replicas, non-root, read-only root, no capabilities, seccomp RuntimeDefault")
labels = objs["Namespace"].metadata.labels
check(all(labels.get("pod-security.kubernetes.io/" + m) == "restricted" for m in ("enforce", "audit", "warn")),
      variant + ": the namespace enforces Pod Security's restricted, which the webhook's pod meets")
check(c.liveness_probe.http_get.path == "/healthz" and c.readiness_probe.http_get.path == "/readyz"
      and c.resources.limits["memory"] and c.resources.requests["cpu"], variant + ": probes and resources")
check(any(v.config_map and v.config_map.name == "gpu-run-profiles" for v in pod.volumes)
      and "--profile-dir" in c.args, variant + ": the profiles ConfigMap is mounted and searched")
config = objs["ConfigMap"].data["webhook.json"]
json.loads(config)
check(d.spec.template.metadata.annotations["gpu-run.io/config-sha256"] == hashlib.sha256(config.encode()).hexdigest(),
      variant + ": the pod template carries webhook.json's sha256, so a changed config rolls the Deployment")
if variant == "cm-config":
    check(json.loads(config) == {"policy": "deny", "namespace_profiles": {"ml": "imagenet"}}, "cm-config: --config's file")
    check(all(o.metadata.labels.get("release") == "kps" for o in objs.values() if hasattr(o, "metadata"))
          and "PrometheusRule" not in objs, "cm-config: --label on every object, no PrometheusRule")
check(objs["PodDisruptionBudget"].spec.min_available == 1, variant + ": PodDisruptionBudget minAvailable 1")
netpol = objs["NetworkPolicy"].spec
port = [p for p in c.ports if p.name == "https"][0].container_port
check(netpol.pod_selector.match_labels == d.spec.template.metadata.labels and netpol.policy_types == ["Ingress", "Egress"]
      and [p.port for p in netpol.ingress[0].ports] == [port] and not netpol.egress,
      variant + ": the NetworkPolicy admits the webhook's port only, and no egress")
check([f.ip_block.cidr for f in netpol.ingress[0]._from or []] == (["10.0.0.0/28"] if variant == "cm-config" else []),
      variant + ": from --apiserver-cidr's blocks only, when given")
hook = objs["MutatingWebhookConfiguration"].webhooks[0]
check(hook.admission_review_versions == ["v1"] and hook.side_effects == "None" and hook.failure_policy == "Ignore"
      and hook.timeout_seconds == 5 and hook.rules[0].operations == ["CREATE"] and hook.rules[0].resources == ["pods"]
      and hook.namespace_selector.match_labels == {"gpu-run.io/webhook": "enabled"}
      and hook.client_config.service.namespace == ns, variant + ": the webhook configuration")

if variant.startswith("cm"):
    # cert-manager's objects against its CRD schemas, unknown fields refused (kubectl's strict field
    # validation; the CRD's own schema does not refuse them, the API server prunes them).
    def strict_schema(schema):
        schema = copy.deepcopy(schema)
        def close(node):
            if isinstance(node, dict):
                if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node \
                        and not node.get("x-kubernetes-preserve-unknown-fields"):
                    node["additionalProperties"] = False
                for v in node.values():
                    close(v)
            elif isinstance(node, list):
                for v in node:
                    close(v)
        close(schema)
        schema.pop("$comment", None)
        return schema
    schemas = {k: strict_schema(json.load(open("%s/cert-manager/%s.v1.schema.json" % (data, k.lower()))))
               for k in ("Certificate", "Issuer")}
    cm_objs = [o for o in docs_all if o["apiVersion"] == "cert-manager.io/v1"]
    for o in cm_objs:
        try:
            jsonschema.validate(o, schemas[o["kind"]])
            check(True, "%s: %s %s validates against cert-manager v1.21.1's CRD schema" % (variant, o["kind"], o["metadata"]["name"]))
        except jsonschema.ValidationError as e:
            check(False, "%s: %s %s: %s" % (variant, o["kind"], o["metadata"]["name"], e.message))
    for what, mutate in (("a misspelled field", lambda o: o["spec"].update(isCa=o["spec"].pop("isCA"))),
                         ("an algorithm cert-manager does not have", lambda o: o["spec"]["privateKey"].update(algorithm="DSA"))):
        o = copy.deepcopy([o for o in cm_objs if o["metadata"]["name"] == "gpu-run-webhook-ca"][0])
        mutate(o)
        try:
            jsonschema.validate(o, schemas["Certificate"])
            check(False, variant + ": the schema refuses " + what)
        except jsonschema.ValidationError:
            check(True, variant + ": the schema refuses " + what)
    # One chain: self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate; the CA injected.
    by = {(o["kind"], o["metadata"]["name"]): o for o in cm_objs}
    ca = by[("Certificate", "gpu-run-webhook-ca")]["spec"]
    serving = by[("Certificate", "gpu-run-webhook")]["spec"]
    check("selfSigned" in by[("Issuer", "gpu-run-webhook-selfsigned")]["spec"] and ca["isCA"] is True
          and ca["issuerRef"] == {"name": "gpu-run-webhook-selfsigned", "kind": "Issuer"}
          and ca["privateKey"]["rotationPolicy"] == "Never"
          and by[("Issuer", "gpu-run-webhook")]["spec"]["ca"]["secretName"] == ca["secretName"]
          and serving["issuerRef"] == {"name": "gpu-run-webhook", "kind": "Issuer"}
          and serving["secretName"] == "gpu-run-webhook-tls" and "gpu-run-webhook.gpu-run.svc" in serving["dnsNames"]
          and mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "gpu-run/gpu-run-webhook-ca"
          and [v.secret.secret_name for v in pod.volumes if v.secret] == ["gpu-run-webhook-tls"],
          variant + ": a CA chain; the caBundle is the CA's, which outlives the serving certificate's renewals")
else:
    ca = open(tls_dir + "/ca.crt", "rb").read()
    check(base64.b64decode(hook.client_config.ca_bundle) == ca, "ss: the caBundle is DIR/ca.crt")
    s = objs["Secret"]
    check(s.type == "kubernetes.io/tls" and base64.b64decode(s.data["tls.crt"]) == open(tls_dir + "/tls.crt", "rb").read()
          and base64.b64decode(s.data["tls.key"]) == open(tls_dir + "/tls.key", "rb").read(),
          "ss: the Secret holds DIR/tls.crt and DIR/tls.key")
    check(c.image == "example.test/webhook:1", "ss: --image")

if variant != "cm-config":
    def slug(title):
        return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    sections = {slug(m.group(1).strip()) for m in re.finditer(r"^#{1,6}\s+(.*)$", open(docs).read(), re.M)}
    groups = objs["PrometheusRule"]["spec"]["groups"]
    for r in (r for g in groups for r in g["rules"]):
        check(r["annotations"]["runbook_url"] == "https://github.com/gpu-run/gpu-run/blob/v%s/docs/kubernetes.md#" % version + r["alert"].lower()
              and r["alert"].lower() in sections, "%s: %s's runbook_url is its section of docs/kubernetes.md" % (variant, r["alert"]))
    yaml.safe_dump({"groups": groups}, open(path + ".rules.yml", "w"))
    for g in groups:
        for r in g["rules"]:
            r.pop("annotations", None)
    yaml.safe_dump({"groups": groups}, open(path + ".rules-bare.yml", "w"))
done()
PYEOF
for f in cm ss cm-config; do
  PYTHONPATH=$here "$PY" "$work/models.py" "$work/$f.yaml" "$f" "$work/tls" "$here/../data" \
    "$here/../../docs/kubernetes.md" "$("$CTL" --version | awk '{ print $2 }')" >"$work/$f.out" 2>&1
  rc=$?
  it_count_checks "$work/$f.out"
  assert_eq 0 "$rc" "$f: the model checks pass"
done
out=$(promtool check rules "$work/cm.yaml.rules.yml" 2>&1)
assert_eq 0 "$?" "promtool check rules passes on the webhook's PrometheusRule ($(tail -n 2 <<<"$out" | tr '\n' ' '))"

# The API server's series, a minute apart, for two API servers: fail-open calls on the first from
# minute 10 (none before); webhook denials (error_type no_error, the deny policy at work) all along,
# calling errors (a failurePolicy of Fail) from minute 10.
hook='name="shm.gpu-run.io",type="admit"'
cat >"$work/webhook_rules_test.yml" <<EOF
rule_files: [cm.yaml.rules-bare.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - {series: 'apiserver_admission_webhook_fail_open_count{$hook,instance="a"}', values: '0x10 1 2 3x20'}
      - {series: 'apiserver_admission_webhook_fail_open_count{$hook,instance="b"}', values: '0x30'}
      - {series: 'apiserver_admission_webhook_rejection_count{$hook,instance="a",operation="CREATE",error_type="no_error",rejection_code="403"}', values: '0+1x30'}
      - {series: 'apiserver_admission_webhook_rejection_count{$hook,instance="b",operation="CREATE",error_type="calling_webhook_error",rejection_code="500"}', values: '0x10 1 2 3x20'}
    alert_rule_test:
      - eval_time: 9m
        alertname: GpuRunWebhookFailingOpen
      - eval_time: 12m
        alertname: GpuRunWebhookFailingOpen
        exp_alerts:
          - exp_labels: {severity: warning, name: shm.gpu-run.io}
      - eval_time: 9m
        alertname: GpuRunWebhookRejectingPods
      - eval_time: 12m
        alertname: GpuRunWebhookRejectingPods
        exp_alerts:
          - exp_labels: {severity: warning, name: shm.gpu-run.io, error_type: calling_webhook_error}
      - eval_time: 25m
        alertname: GpuRunWebhookFailingOpen
EOF
out=$(cd "$work" && promtool test rules webhook_rules_test.yml 2>&1)
assert_eq 0 "$?" "promtool test rules: GpuRunWebhookFailingOpen and GpuRunWebhookRejectingPods fire when the API server counts, not before, and not for the webhook's own denials"
[[ $IT_FAILED -eq 0 ]] || printf '%s\n' "$out"

# The self-signed pair in use: the webhook serves it, a client that trusts only the caBundle
# and checks the Service's name connects.
"$WEBHOOK" --listen 127.0.0.1:0 --tls-cert "$work/tls/tls.crt" --tls-key "$work/tls/tls.key" 2>"$work/stderr" &
pid=$!
stop_webhook() { kill -9 "$pid" 2>/dev/null || true; }
it_on_exit stop_webhook
port=$(it_webhook_port "$work/stderr") || it_die "the webhook did not start: $(cat "$work/stderr")"
got=$("$PY" - "$port" "$work/tls/ca.crt" <<'PYEOF'
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
for name in ("gpu-run-webhook.shm-test.svc", "gpu-run-webhook.other.svc"):
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))), server_hostname=name) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            print(name, s.recv(100).split(b"\r\n")[0].decode())
    except ssl.SSLCertVerificationError:
        print(name, "refused")
PYEOF
)
assert_contains "$got" "gpu-run-webhook.shm-test.svc HTTP/1.1 200 OK" "TLS for the Service's name verifies against the caBundle"
assert_contains "$got" "gpu-run-webhook.other.svc refused" "...and not for another name"
kill -TERM "$pid"
wait "$pid"
assert_eq 0 "$?" "the webhook stops on SIGTERM"

it_done
