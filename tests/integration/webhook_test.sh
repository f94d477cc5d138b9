#!/usr/bin/env bash
# gpu-run-webhook over real TLS on 127.0.0.1: AdmissionReviews for Pods built with the
# Kubernetes Python client's models, the returned JSONPatch applied with python3-jsonpatch and
# the patched pod deserialized with the same models and read back by kubectl offline (a DDP
# worker with 8 GPUs, a Ray worker, a notebook, two GPU containers with a sidecar and an init
# container); a namespace default profile; /healthz, /readyz, /metrics; a Deployment, a pod
# with no containers, NUL bytes and a 1 MiB annotation, a 10 MiB body, malformed JSON, a client
# sending a byte a second (closed by the server), a certificate replaced while running
# (reloaded), 20 requests on one kept-alive connection, the listen backlog, SIGTERM (clean exit).
# Usage: webhook_test.sh [PATH/TO/gpu-run]   (gpu-run-webhook is looked up next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd openssl
it_require_cmd ss
# Debian's python3, where python3-kubernetes and python3-jsonpatch are (not a pyenv on PATH).
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, jsonpatch' 2>/dev/null ||
  it_skip "python3-kubernetes and python3-jsonpatch are needed (scripts/install-deps installs them)"

bin_dir=${GPU_RUN_BIN_DIR:-}
[[ -z $bin_dir && -n ${1:-} ]] && bin_dir=$(dirname "$1")
[[ -z $bin_dir ]] && bin_dir=$here/../../build/release/bin
WEBHOOK=$bin_dir/gpu-run-webhook
[[ -x $WEBHOOK ]] || it_skip "gpu-run-webhook not found in $bin_dir (build it, or set GPU_RUN_BIN_DIR)"
it_log "testing $WEBHOOK"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
unset GPU_RUN_PROFILE_PATH || true

make_cert() {  # make_cert DIR CN
  mkdir -p "$1"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1/tls.key" -out "$1/tls.crt" -days 1 \
    -subj "/CN=$2" -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1 || it_die "openssl req failed"
}
make_cert "$work/a" gpu-run-webhook-a
make_cert "$work/b" gpu-run-webhook-b
cp "$work/a/tls.crt" "$work/tls.crt"
cp "$work/a/tls.key" "$work/tls.key"

# The profile the sizes are worked out for (tests/unit/webhook/admission_test.cpp): 4 MiB
# batches, 2 workers per GPU, NCCL 64 MiB (flat): 8 GPUs -> 8 * ((2*2) * 4 MiB + 72 KiB semaphores) + 64 MiB -> 193 MiB.
# The directory is laid out as the kubelet mounts a ConfigMap: the data in a timestamped
# directory, `..data` a symlink to it, each key a symlink through `..data`.
write_webtest() {  # write_webtest DIR BATCH_SIZE
  mkdir -p "$1"
  cat >"$1/webtest.json" <<EOF
{"name": "webtest", "extends": null,
 "fields": [{"name": "x", "shape": [1048576], "dtype": "uint8"}],
 "batch_size": $2, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true,
 "headroom": 1.0, "nccl_reserve": "64m", "min_shm": "1m", "max_shm": "1g"}
EOF
}
write_webtest "$work/profiles/..2026_12_03_07_00_00.1" 4
ln -s ..2026_12_03_07_00_00.1 "$work/profiles/..data"
ln -s ..data/webtest.json "$work/profiles/webtest.json"
# Namespace ml's default profile is webtest (a pod there that names none is sized with it).
printf '{"policy": "raise", "namespace_profiles": {"ml": "webtest"}}\n' >"$work/config.json"

"$WEBHOOK" --listen 127.0.0.1:0 --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
  --profile-dir "$work/profiles" --config "$work/config.json" --io-timeout 2 --request-timeout 3 \
  --tls-reload-interval 1 2>"$work/stderr" &
pid=$!
stop_webhook() { kill -9 "$pid" 2>/dev/null || true; }
it_on_exit stop_webhook
port=$(it_webhook_port "$work/stderr") || it_die "the webhook did not start: $(cat "$work/stderr")"
it_log "listening on 127.0.0.1:$port"
# Debian's cpp-httplib listens with a backlog of 5; the server raises it (an API server opening
# its connections at once would otherwise lose SYNs for 1-3 s).
backlog=$(ss -Hlnt "sport = :$port" | awk '{print $3}')
assert_eq 1 "$([[ ${backlog:-0} -ge 128 ]] && echo 1 || echo 0)" "the listen backlog is at least 128 (ss says ${backlog:-nothing})"

cat >"$work/client.py" <<'EOF'
import base64, http.client, json, socket, ssl, sys, time
import jsonpatch
from kubernetes import client as k

port, cafile, phase = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out_dir = sys.argv[4] if len(sys.argv) > 4 else "." 
api = k.ApiClient()
failed = 0


def check(ok, what):
    global failed
    print(("ok - " if ok else "FAIL - ") + what)
    if not ok:
        failed += 1


def conn():
    ctx = ssl.create_default_context(cafile=cafile)
    return http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)


def request(method, path, body=None):
    c = conn()
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def review(pod, uid, namespace="ml"):
    obj = api.sanitize_for_serialization(pod)
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": namespace, "operation": "CREATE", "object": obj}}
    status, data = request("POST", "/mutate", json.dumps(body))
    return obj, status, json.loads(data)


class Response:
    def __init__(self, data):
        self.data = json.dumps(data)


def apply(obj, resp):
    if "patch" not in resp:
        return obj
    ops = json.loads(base64.b64decode(resp["patch"]))
    return jsonpatch.apply_patch(obj, ops)


def ddp_pod():
    return k.V1Pod(
        api_version="v1", kind="Pod",
        metadata=k.V1ObjectMeta(name="ddp-worker-0", namespace="ml", annotations={"gpu-run.profile": "webtest"}),
        spec=k.V1PodSpec(containers=[
            k.V1Container(name="pytorch", image="pytorch/pytorch",
                          env=[k.V1EnvVar(name="MASTER_ADDR", value="ddp-master-0")],
                          resources=k.V1ResourceRequirements(
                              limits={"nvidia.com/gpu": "8", "memory": "64Gi", "cpu": "32"},
                              requests={"nvidia.com/gpu": "8", "memory": "32Gi"})),
            k.V1Container(name="sidecar", image="busybox")]))


if phase == "main":
    status, data = request("GET", "/healthz")
    check(status == 200 and data == b"ok\n", "/healthz answers 200 ok")
    status, data = request("GET", "/readyz")
    check(status == 200, "/readyz answers 200")

    obj, status, out = review(ddp_pod(), "uid-ddp")
    resp = out.get("response", {})
    check(status == 200 and out.get("kind") == "AdmissionReview", "POST /mutate answers an AdmissionReview")
    check(resp.get("uid") == "uid-ddp" and resp.get("allowed") is True, "uid echoed, allowed")
    check(resp.get("patchType") == "JSONPatch", "a JSONPatch")
    patched = apply(obj, resp)
    pod = api.deserialize(Response(patched), "V1Pod")
    check(isinstance(pod, k.V1Pod), "the patched pod deserializes as a V1Pod")
    vols = [v for v in pod.spec.volumes or [] if v.empty_dir and v.empty_dir.medium == "Memory"]
    check(len(vols) == 1 and vols[0].empty_dir.size_limit == "1Gi",
          "emptyDir medium Memory, sizeLimit 1Gi: the guard's ceiling, webtest's max_shm")
    main = pod.spec.containers[0]
    mounts = [m for m in main.volume_mounts or [] if m.mount_path == "/dev/shm"]
    check(len(mounts) == 1 and mounts[0].name == vols[0].name, "the GPU container mounts it at /dev/shm")
    check(not pod.spec.containers[1].volume_mounts, "the sidecar is left alone")
    env = {e.name: e.value for e in main.env}
    check(env.get("MASTER_ADDR") == "ddp-master-0" and env.get("GPU_RUN_SHM_SIZE") == "193m"
          and env.get("GPU_RUN_SHM_LIMIT") == "1024m"
          and env.get("GPU_RUN_NUM_WORKERS") == "2" and env.get("GPU_RUN_PROFILE") == "webtest",
          "GPU_RUN_* env added (the plan 193m: 8 * (16 MiB + 72 KiB) + 64 MiB), the pod's env kept")
    check(env.get("GPU_RUN_DECISION") == (pod.metadata.annotations or {}).get("gpu-run.decision")
          and json.loads(env.get("GPU_RUN_DECISION") or "{}").get("door") == "gpu-run-webhook",
          "the pod's gpu-run.decision also in GPU_RUN_DECISION, where the guard reads it on any node")
    check(main.resources.limits["memory"] == "65729Mi" and main.resources.requests["memory"] == "32961Mi",
          "memory limit and request raised by 193Mi: " + str(main.resources.limits["memory"]))

    _, _, again = review(pod, "uid-again")
    check("patch" not in again["response"] and again["response"]["uid"] == "uid-again",
          "re-admission of the patched pod: no patch")

    # No annotation: in ml the config's default profile webtest sizes the GPU container
    # (2 GPUs: 2 * (16 MiB + 72 KiB of semaphore pages) + 64 MiB = 97 MiB); in namespace web nothing is changed.
    plain = k.V1Pod(
        api_version="v1", kind="Pod", metadata=k.V1ObjectMeta(name="trainer", namespace="ml"),
        spec=k.V1PodSpec(containers=[
            k.V1Container(name="train", image="pytorch/pytorch",
                          resources=k.V1ResourceRequirements(limits={"nvidia.com/gpu": "2", "memory": "16Gi"}))]))
    obj, _, out = review(plain, "uid-ns-default")
    pod = api.deserialize(Response(apply(obj, out["response"])), "V1Pod")
    vols = [v for v in pod.spec.volumes or [] if v.empty_dir and v.empty_dir.medium == "Memory"]
    env = {e.name: e.value for e in pod.spec.containers[0].env or []}
    check(len(vols) == 1 and env.get("GPU_RUN_SHM_SIZE") == "97m" and env.get("GPU_RUN_PROFILE") == "webtest"
          and pod.spec.containers[0].resources.limits["memory"] == "16481Mi",
          "namespace ml's default profile: a pod naming none gets 97Mi, limit 16481Mi")
    plain.metadata.namespace = "web"
    _, _, out = review(plain, "uid-other-ns", namespace="web")
    check(out["response"]["allowed"] is True and "patch" not in out["response"],
          "the same pod in namespace web (no default): unchanged")

    # More pods as they come from the field, sizes worked out by hand for webtest (4 MiB batches,
    # 2 workers, prefetch 2, 18 semaphore pages = 72 KiB a loader, rounded up to whole MiB).
    def gpu_container(name, limits):
        return k.V1Container(name=name, image="pytorch/pytorch", resources=k.V1ResourceRequirements(limits=limits))

    def admitted(pod, uid, what):
        obj, status, out = review(pod, uid)
        resp = out.get("response", {})
        check(status == 200 and resp.get("allowed") is True and resp.get("patchType") == "JSONPatch",
              what + ": allowed with a JSONPatch")
        patched = apply(obj, resp)
        with open(f"{out_dir}/{uid}.json", "w") as f:  # kubectl reads it back (below)
            json.dump(patched, f)
        pod = api.deserialize(Response(patched), "V1Pod")
        check(isinstance(pod, k.V1Pod), what + ": the patched pod deserializes as a V1Pod")
        vols = [v for v in pod.spec.volumes or [] if v.empty_dir and v.empty_dir.medium == "Memory"]
        if len(vols) != 1:
            return pod, None
        # The plan, GPU_RUN_SHM_SIZE of the containers that mount the volume, as a quantity (the
        # sizeLimit is the guard's ceiling, webtest's max_shm 1Gi here).
        plans = {e.value for c in pod.spec.containers if any(m.mount_path == "/dev/shm" for m in c.volume_mounts or [])
                 for e in c.env or [] if e.name == "GPU_RUN_SHM_SIZE"}
        check(vols[0].empty_dir.size_limit == "%dGi" % len([c for c in pod.spec.containers if c.volume_mounts]),
              what + ": sizeLimit 1Gi a container (%s)" % vols[0].empty_dir.size_limit)
        return pod, (plans.pop().replace("m", "Mi") if len(plans) == 1 else None)

    # A Ray worker: 1 GPU, pin thread: 2*2 * 4 MiB + 72 KiB -> 17 MiB; memory 12Gi -> 12305Mi.
    ray = k.V1Pod(api_version="v1", kind="Pod",
                  metadata=k.V1ObjectMeta(name="raycluster-worker-gpu-x7", namespace="ml",
                                          labels={"ray.io/node-type": "worker"},
                                          annotations={"gpu-run.profile": "webtest"}),
                  spec=k.V1PodSpec(containers=[gpu_container(
                      "ray-worker", {"nvidia.com/gpu": "1", "cpu": "3500m", "memory": "12Gi"})]))
    pod, size = admitted(ray, "uid-ray", "Ray worker")
    check(size == "17Mi" and pod.spec.containers[0].resources.limits["memory"] == "12305Mi",
          "Ray worker: 17Mi, limit 12305Mi (got %s)" % size)
    # A notebook without a GPU: no pin thread, hold 2, +1 without persistent_workers:
    # (2*2 + 3) * 4 MiB + 72 KiB -> 29 MiB; 8Gi -> 8221Mi.
    notebook = k.V1Pod(api_version="v1", kind="Pod",
                       metadata=k.V1ObjectMeta(name="notebook-0", namespace="ml",
                                               annotations={"gpu-run.profile": "webtest"}),
                       spec=k.V1PodSpec(containers=[gpu_container("notebook", {"memory": "8Gi"})]))
    pod, size = admitted(notebook, "uid-notebook", "notebook")
    check(size == "29Mi" and pod.spec.containers[0].resources.limits["memory"] == "8221Mi"
          and pod.spec.containers[0].volume_mounts[0].mount_path == "/dev/shm",
          "notebook: 29Mi at /dev/shm, limit 8221Mi (got %s)" % size)
    # Two GPU containers, a sidecar and an init container: 2 GPUs 2 * (16 MiB + 72 KiB) + 64 MiB
    # NCCL -> 97 MiB, 1 GPU 17 MiB: one volume of 114 MiB; each limit raised by its own plan.
    two = k.V1Pod(api_version="v1", kind="Pod",
                  metadata=k.V1ObjectMeta(name="two-trainers", namespace="ml",
                                          annotations={"gpu-run.profile": "webtest"}),
                  spec=k.V1PodSpec(
                      init_containers=[k.V1Container(name="fetch-data", image="busybox")],
                      containers=[gpu_container("trainer-a", {"nvidia.com/gpu": "2", "memory": "16Gi"}),
                                  k.V1Container(name="log-shipper", image="fluent-bit"),
                                  gpu_container("trainer-b", {"nvidia.com/gpu": "1", "memory": "16Gi"})]))
    pod, size = admitted(two, "uid-two", "two GPU containers and a sidecar")
    cs = pod.spec.containers
    check(size == "114Mi" and cs[0].resources.limits["memory"] == "16481Mi"
          and cs[2].resources.limits["memory"] == "16401Mi" and not cs[1].volume_mounts
          and not pod.spec.init_containers[0].volume_mounts,
          "two GPU containers: 114Mi, limits 16481Mi and 16401Mi, sidecar and init container untouched")

    # Hostile or odd reviews over the wire: answered, never a crash.
    deployment = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "uid-deployment", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                              "operation": "CREATE", "object": {"kind": "Deployment"}}}
    status, data = request("POST", "/mutate", json.dumps(deployment))
    resp = json.loads(data)["response"]
    check(status == 200 and resp["allowed"] is True and "patch" not in resp and resp["uid"] == "uid-deployment",
          "a Deployment: allowed unchanged")
    empty = k.V1Pod(api_version="v1", kind="Pod",
                    metadata=k.V1ObjectMeta(name="empty", annotations={"gpu-run.profile": "webtest"}),
                    spec=k.V1PodSpec(containers=[]))
    _, status, out = review(empty, "uid-empty")
    check(out["response"]["allowed"] is True and "patch" not in out["response"] and out["response"].get("warnings"),
          "a pod with no containers: allowed unchanged, with a warning")
    for uid, annotations in (("uid-nul", {"gpu-run.profile": "webtest\u0000x"}),
                             ("uid-huge", {"gpu-run.profile": "webtest", "gpu-run.workers": "9" * (1 << 20)})):
        nasty = ddp_pod()
        nasty.metadata.annotations = annotations
        _, status, out = review(nasty, uid)
        check(status == 200 and out["response"]["allowed"] is False and out["response"]["status"]["message"],
              uid + ": denied with a reason: " + out["response"]["status"]["message"][:100])

    hostile = ddp_pod()
    hostile.metadata.annotations = {"gpu-run.profile": "../../etc/passwd"}
    _, status, out = review(hostile, "uid-hostile")
    check(status == 200 and out["response"]["allowed"] is False
          and "profile" in out["response"]["status"]["message"], "a profile path is denied with a reason")

    status, data = request("POST", "/mutate", "{not json")
    check(status == 200 and json.loads(data)["response"]["allowed"] is True, "malformed JSON: allowed, no crash")

    try:
        status, data = request("POST", "/mutate", b"x" * (10 << 20))
        check(status == 413, "a 10 MiB body: 413 (got %d)" % status)
    except (ConnectionError, OSError) as e:
        check(True, "a 10 MiB body: connection closed by the server (%s)" % type(e).__name__)

    # A client that sends a request a byte a second: the server closes it (request timeout 3s).
    ctx = ssl.create_default_context(cafile=cafile)
    raw = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
    raw.settimeout(30)
    start = time.monotonic()
    closed = False
    try:
        for ch in b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"{" * 100000:
            raw.send(bytes([ch]))
            time.sleep(1)
            if time.monotonic() - start > 20:
                break
    except (ConnectionError, OSError, ssl.SSLError):
        closed = True
    elapsed = time.monotonic() - start
    check(closed and elapsed < 15, "a byte-a-second client is cut off after %.1fs" % elapsed)
    status, _ = request("GET", "/healthz")
    check(status == 200, "the server still answers after the slow client")

    # One kept-alive connection used longer than the request timeout (3s): each handled
    # request restarts its clock, so the connection is not cut between requests.
    c = conn()
    kept, socks = 0, set()
    for _ in range(3):
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        kept += r.status == 200
        socks.add(id(c.sock))
        time.sleep(1.6)
    sock_still_same = len(socks) == 1 and c.sock is not None
    c.close()
    check(kept == 3 and sock_still_same, "a kept-alive connection serves 3 requests over 4.8s")

    # cpp-httplib closes a connection after 5 requests unless told otherwise (a TLS handshake
    # every fifth review, bench/WEBHOOK.md).
    c = conn()
    socks, closes, answered = set(), 0, 0
    for _ in range(20):
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        answered += r.status == 200
        closes += (r.getheader("Connection") or "").lower() == "close"
        socks.add(id(c.sock))
    c.close()
    check(answered == 20 and closes == 0 and len(socks) == 1, "one connection serves 20 requests in a row, none closed")

    status, data = request("GET", "/metrics")
    text = data.decode()
    check(status == 200 and "gpu_run_webhook_reviews_total 13" in text and "gpu_run_webhook_patches_total 5" in text
          and "gpu_run_webhook_denials_total 3" in text and "gpu_run_webhook_errors_total 1" in text,
          "/metrics counts 13 reviews, 5 patches, 3 denials, 1 error")
    check('gpu_run_webhook_review_duration_seconds_bucket{le="+Inf"} 13' in text, "/metrics latency histogram")

elif phase == "reload":
    # The size the DDP worker gets now (after the ConfigMap was updated).
    obj, status, out = review(ddp_pod(), "uid-reload")
    patched = apply(obj, out["response"])
    vols = [v for v in patched["spec"].get("volumes", []) if v.get("emptyDir", {}).get("medium") == "Memory"]
    env = {e["name"]: e["value"] for e in patched["spec"]["containers"][0].get("env", [])}
    print(env.get("GPU_RUN_SHM_SIZE", "none").replace("m", "Mi") if vols else "none")
    sys.exit(0)

elif phase == "cert":
    # The served certificate's subject, after the files were replaced.
    ctx = ssl.create_default_context(cafile=cafile)
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as s:
        cn = dict(x[0] for x in s.getpeercert()["subject"])["commonName"]
    print(cn)
    sys.exit(0)

sys.exit(1 if failed else 0)
EOF

mkdir -p "$work/patched"
"$PY" "$work/client.py" "$port" "$work/a/tls.crt" main "$work/patched" >"$work/client.out" 2>&1
rc=$?
cat "$work/client.out"
IT_PASSED=$((IT_PASSED + $(grep -c '^ok - ' "$work/client.out")))
IT_FAILED=$((IT_FAILED + $(grep -c '^FAIL - ' "$work/client.out")))
assert_eq 0 "$rc" "the TLS client's checks pass"

logs=$(cat "$work/stderr")
assert_contains "$logs" 'event=review uid=uid-ddp pod=ml/ddp-worker-0 outcome=patched size=193Mi' \
  "one structured log line per review"
assert_contains "$logs" 'event=review uid=uid-ns-default pod=ml/trainer outcome=patched size=97Mi containers=train namespace_profile=webtest' \
  "the log names the namespace's default profile"
assert_not_contains "$logs" "namespace-profile-missing" "namespace ml's default profile loads at start"
assert_eq 13 "$(grep -c 'event=review ' "$work/stderr")" "13 log lines for 13 reviews (the 413 and the slow client never reached /mutate)"

# kubectl reads the patched pods back offline (`label --local` decodes each into a typed Pod).
if command -v kubectl >/dev/null; then
  it_log "kubectl: $(kubectl version --client 2>/dev/null | head -n 1)"
  for f in "$work"/patched/uid-*.json; do
    assert_eq Pod "$(kubectl label --local -f "$f" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" | jq -r .kind)" \
      "kubectl reads the patched pod $(basename "$f" .json) ($(head -c 200 "$work/kubectl.err"))"
  done
else
  it_fail "kubectl not found (scripts/install-deps installs Debian's kubernetes-client)"
fi

# The certificate replaced while running: new handshakes get the new one.
cp "$work/b/tls.key" "$work/tls.key.new" && cp "$work/b/tls.crt" "$work/tls.crt.new"
mv "$work/tls.key.new" "$work/tls.key" && mv "$work/tls.crt.new" "$work/tls.crt"
cn=
for _ in $(seq 30); do
  sleep 0.5
  cn=$("$PY" "$work/client.py" "$port" "$work/b/tls.crt" cert 2>/dev/null) && break
done
assert_eq gpu-run-webhook-b "$cn" "the replaced certificate is served without a restart"
assert_contains "$(cat "$work/stderr")" "event=tls-reload" "the reload is logged"

# The ConfigMap updated as the kubelet does it (a new data directory, `..data` renamed over):
# batches of 8 MiB, 8 * ((2*2) * 8 MiB + 72 KiB) + 64 MiB -> 321 MiB, without a restart (the
# webhook checks the directories at most once a second).
write_webtest "$work/profiles/..2026_12_03_07_01_00.2" 8
ln -s ..2026_12_03_07_01_00.2 "$work/profiles/..data_tmp"
mv -T "$work/profiles/..data_tmp" "$work/profiles/..data"
rm -rf "$work/profiles/..2026_12_03_07_00_00.1"
size=
for _ in $(seq 20); do
  size=$("$PY" "$work/client.py" "$port" "$work/b/tls.crt" reload 2>&1) && [[ $size == 321Mi ]] && break
  sleep 0.5
done
assert_eq 321Mi "$size" "an updated ConfigMap (its ..data swapped) sizes the next reviews without a restart"

kill -TERM "$pid"
rc=0
for _ in $(seq 50); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
wait "$pid" || rc=$?
assert_eq 0 "$rc" "SIGTERM: exit 0"
assert_contains "$(cat "$work/stderr")" "event=shutdown signal=SIGTERM" "SIGTERM is logged"

it_done
