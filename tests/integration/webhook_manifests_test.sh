#!/usr/bin/env bash
# gpu-run-ctl k8s webhook-manifests: both certificate set-ups read back by kubectl (offline:
# `kubectl label --local` decodes every object) and by the Kubernetes Python client's models
# (each object deserialized and serialized back unchanged, so no field is unknown or
# misspelled); packaging/kubernetes/gpu-run-webhook.yaml is the command's output; the
# --self-signed pair serves real TLS for the Service's name with the caBundle as the only trust.
# Usage: webhook_manifests_test.sh [PATH/TO/gpu-run]   (the other binaries next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd kubectl jq
it_log "kubectl: $(kubectl version --client 2>/dev/null | head -n 1)"
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, yaml' 2>/dev/null ||
  it_skip "python3-kubernetes and python3-yaml are needed (scripts/install-deps installs them)"

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

for f in cm ss; do
  kinds=$(kubectl label --local -f "$work/$f.yaml" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" |
    jq -r 'if .items then .items[].kind else .kind end' | tr '\n' ' ')
  case $f in
    cm) want="Namespace ConfigMap Issuer Certificate Deployment Service PodDisruptionBudget MutatingWebhookConfiguration " ;;
    ss) want="Namespace ConfigMap Secret Deployment Service PodDisruptionBudget MutatingWebhookConfiguration " ;;
  esac
  assert_eq "$want" "$kinds" "$f: kubectl reads every object ($(head -c 200 "$work/kubectl.err"))"
done

cat >"$work/models.py" <<'PYEOF'
import base64, json, sys
from k8s_models import check, done, read_objects

MODELS = {"Namespace": "V1Namespace", "ConfigMap": "V1ConfigMap", "Secret": "V1Secret", "Deployment": "V1Deployment",
          "Service": "V1Service", "PodDisruptionBudget": "V1PodDisruptionBudget",
          "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration"}
path, variant, tls_dir = sys.argv[1], sys.argv[2], sys.argv[3]
objs = read_objects(path, MODELS, variant)
ns = "gpu-run" if variant == "cm" else "shm-test"
d = objs["Deployment"]
pod = d.spec.template.spec
c = pod.containers[0]
check(d.spec.replicas == 2 and pod.security_context.run_as_non_root and pod.security_context.run_as_user == 65532
      and pod.security_context.seccomp_profile.type == "RuntimeDefault"
      and c.security_context.read_only_root_filesystem and c.security_context.capabilities.drop == ["ALL"]
      and c.security_context.allow_privilege_escalation is False,
      variant + ": 2 replicas, non-root, read-only root, no capabilities, seccomp RuntimeDefault")
check(c.liveness_probe.http_get.path == "/healthz" and c.readiness_probe.http_get.path == "/readyz"
      and c.resources.limits["memory"] and c.resources.requests["cpu"], variant + ": probes and resources")
check(any(v.config_map and v.config_map.name == "gpu-run-profiles" for v in pod.volumes)
      and "--profile-dir" in c.args, variant + ": the profiles ConfigMap is mounted and searched")
json.loads(objs["ConfigMap"].data["webhook.json"])
check(objs["PodDisruptionBudget"].spec.min_available == 1, variant + ": PodDisruptionBudget minAvailable 1")
hook = objs["MutatingWebhookConfiguration"].webhooks[0]
check(hook.admission_review_versions == ["v1"] and hook.side_effects == "None" and hook.failure_policy == "Ignore"
      and hook.timeout_seconds and hook.rules[0].operations == ["CREATE"] and hook.rules[0].resources == ["pods"]
      and hook.namespace_selector.match_labels == {"gpu-run.io/webhook": "enabled"}
      and hook.client_config.service.namespace == ns, variant + ": the webhook configuration")
if variant == "cm":
    meta = objs["MutatingWebhookConfiguration"].metadata
    check(meta.annotations["cert-manager.io/inject-ca-from"] == "gpu-run/gpu-run-webhook"
          and objs["Certificate"]["spec"]["secretName"] == "gpu-run-webhook-tls"
          and "gpu-run-webhook.gpu-run.svc" in objs["Certificate"]["spec"]["dnsNames"]
          and "selfSigned" in objs["Issuer"]["spec"], "cm: Issuer, Certificate and the CA injected by cert-manager")
else:
    ca = open(tls_dir + "/ca.crt", "rb").read()
    check(base64.b64decode(hook.client_config.ca_bundle) == ca, "ss: the caBundle is DIR/ca.crt")
    s = objs["Secret"]
    check(s.type == "kubernetes.io/tls" and base64.b64decode(s.data["tls.crt"]) == open(tls_dir + "/tls.crt", "rb").read()
          and base64.b64decode(s.data["tls.key"]) == open(tls_dir + "/tls.key", "rb").read(),
          "ss: the Secret holds DIR/tls.crt and DIR/tls.key")
    check(c.image == "example.test/webhook:1", "ss: --image")
done()
PYEOF
for f in cm ss; do
  PYTHONPATH=$here "$PY" "$work/models.py" "$work/$f.yaml" "$f" "$work/tls" >"$work/$f.out" 2>&1
  rc=$?
  it_count_checks "$work/$f.out"
  assert_eq 0 "$rc" "$f: the model checks pass"
done

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
