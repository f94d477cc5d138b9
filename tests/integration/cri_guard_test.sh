#!/usr/bin/env bash
# gpu-run-ctl guard --engine containerd on a Kubernetes-like node: pods run through the CRI gRPC
# API as the kubelet runs them, against Debian's containerd started privately, and the guard
# finds their containers by watching containerd's task directories (no engine CLI polled).
# A pod's container whose /dev/shm is containerd's 64 MiB sandbox tmpfs writes 240 MiB into it
# and finishes; its series carry namespace, pod and container (promtool checks them, a real
# Prometheus answers a query by them); N pods started one after another are each guarded
# within 100 ms of StartContainer (p99 reported); a pod removed in the middle of its writes
# leaves the guard running without a warning. A pod whose /dev/shm is a kubelet emptyDir as the
# real webhook writes it is lowered to the plan, grown as it writes 240 MiB, never past its sizeLimit.
# Usage: cri_guard_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl next to it, or in $GPU_RUN_BIN_DIR)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=cri/cri_lib.sh
source "$HERE/cri/cri_lib.sh"

it_require_root
it_require_cmd containerd ctr runc jq curl python3 openssl
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
  it_skip "prometheus and promtool are needed (scripts/install-deps installs them)"
it_binaries "${1:-}" gpu-run-ctl gpu-run-webhook
CTL=$IT_BIN/gpu-run-ctl
PY=/usr/bin/python3
"$PY" -c 'import jsonpatch' 2>/dev/null || it_skip "python3-jsonpatch is needed (scripts/install-deps installs it)"
N=${GPU_RUN_CRI_GUARD_PODS:-20}

D=$(it_tmpdir)
it_on_exit it_cri_stop "$D"
IT_CRI_SOCK=$D/ctd.sock
export IT_CRI_SOCK
it_rootfs
it_isolate_config "$D" "{\"log_file\": \"$D/gpu-run.log\", \"guard\": {\"min_free_fraction\": 0.25, \"step_fraction\": 0.5}}"
it_cri_config "$D"
it_cri_start "$D"
it_cri_image "$D"

pids=()
# shellcheck disable=SC2317  # called through it_on_exit
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; true; }
it_on_exit stop_all
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# A wrong state directory is an error at start.
assert_exit 1 "$CTL" guard --engine containerd --containerd-state "$D/nowhere"
assert_contains "$IT_ERR" "is not a directory" "a wrong --containerd-state is refused at start"
gport=$(free_port)
"$CTL" guard --engine containerd --containerd-state "$D/state" --metrics "127.0.0.1:$gport" 2>"$D/guard.err" &
guard=$!
pids+=("$guard")
for _ in $(seq 100); do grep -q "guard: guarding the containerd" "$D/guard.err" && break; sleep 0.05; done


# ------------------------------------------------------------ a pod writes 240 MiB into 64 MiB
it_cri pod --name train --env GPU_RUN_SHM_SIZE=64m >"$D/train.json" 2>"$D/train.err" ||
  it_die "the pod did not start: $(cat "$D/train.err")"
c=$(jq -r '.containers[0]' "$D/train.json")
for _ in $(seq 100); do grep -q "guard: guarding container c0 (${c:0:12})" "$D/guard.err" && break; sleep 0.02; done
assert_contains "$(cat "$D/guard.err")" "guarding container c0 (${c:0:12})" "the pod's container is guarded"
assert_contains "$(cat "$D/guard.err")" "guard: guarding the containerd" "the guard runs"
assert_not_contains "$(cat "$D/guard.err")" "not guarding" "the sandbox (pause) container is passed over silently"
out=$(it_cri exec "$c" sh -c 'i=0; while [ $i -lt 30 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.15; done; ls /dev/shm | wc -l; df -k /dev/shm | tail -n 1')
rc=$?
assert_eq 0 "$rc" "the pod's container wrote 240 MiB into its 64 MiB /dev/shm (exit 0)"
kb=$(printf '%s\n' "$out" | awk 'NR == 2 { print $2 }')
[[ ${kb:-0} -ge $((240 * 1024)) ]] && it_pass "df in the container: /dev/shm grown to $kb KiB" ||
  it_fail "df in the container: [$out]"
assert_contains "$(cat "$D/guard.err")" "guard: container c0: /dev/shm 64MiB -> " "the guard logged the growths"

# ------------------------------------------------------------ its series, as Prometheus sees them
curl -s "http://127.0.0.1:$gport/metrics" >"$D/guard.prom"
assert_contains "$(cat "$D/guard.prom")" \
  "gpu_run_shm_used_bytes{namespace=\"gpu-run-test\",pod=\"train\",container=\"c0\",container_id=\"$c\"" \
  "the series carry namespace, pod and container"
if [[ -s $D/guard.prom ]] && promtool check metrics <"$D/guard.prom" >"$D/promtool.out" 2>&1; then
  it_pass "promtool check metrics passes on the pod's series"
else
  it_fail "promtool check metrics: [$(cat "$D/promtool.out" 2>/dev/null)] on [$(head -c 300 "$D/guard.prom")]"
fi
pport=$(it_prometheus_start "$D" "127.0.0.1:$gport")
pids+=("$(cat "$D/prometheus.pid")")
query='gpu_run_shm_used_bytes{namespace="gpu-run-test",pod="train",container="c0"}'
value=$(it_prometheus_value "$pport" "$query")
assert_eq $((240 << 20)) "${value:-none}" "Prometheus answers $query with the 240 MiB written"

# ------------------------------------------------------------ the webhook's route: an emptyDir
# The real webhook reviews a pod asking for a 64 MiB /dev/shm with a 1Gi memory limit; its patch
# (applied with jsonpatch) is the pod started here. The kubelet mounts a memory-backed emptyDir as
# a tmpfs of its sizeLimit and evicts the pod at once when use passes it (docs/ARCHITECTURE.md):
# the webhook writes the guard's ceiling as the sizeLimit and the plan in GPU_RUN_SHM_SIZE; the
# guard lowers the tmpfs to the plan, grows it as the pod writes 240 MiB, and never past the
# sizeLimit. The tmpfs is mounted here where and as the kubelet mounts it (no kubelet runs here).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/tls.key" -out "$D/tls.crt" -days 1 -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1 || it_die "openssl req failed"
"$IT_BIN/gpu-run-webhook" --listen 127.0.0.1:0 --tls-cert "$D/tls.crt" --tls-key "$D/tls.key" 2>"$D/webhook.err" &
pids+=("$!")
wport=$(it_webhook_port "$D/webhook.err") || it_die "the webhook did not start: $(cat "$D/webhook.err")"
"$PY" - "$wport" "$D/tls.crt" >"$D/patched.json" 2>"$D/review.err" <<'PY' || it_die "the review failed: $(cat "$D/review.err")"
import base64, json, ssl, sys, urllib.request
import jsonpatch
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "webhooked", "namespace": "gpu-run-test", "annotations": {"gpu-run.shm-size": "64m"}},
       "spec": {"containers": [{"name": "c0", "image": "busybox", "resources": {"limits": {"memory": "1Gi"}}}]}}
review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                      "resource": {"group": "", "version": "v1", "resource": "pods"},
                      "namespace": "gpu-run-test", "operation": "CREATE", "object": pod}}
ctx = ssl.create_default_context(cafile=sys.argv[2])
req = urllib.request.Request("https://127.0.0.1:%s/mutate" % sys.argv[1], json.dumps(review).encode(),
                             {"Content-Type": "application/json"})
resp = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))["response"]
print(json.dumps(jsonpatch.apply_patch(pod, json.loads(base64.b64decode(resp["patch"])))))
PY
limit=$(jq -r '.spec.volumes[0].emptyDir.sizeLimit' "$D/patched.json")
memory=$(jq -r '.spec.containers[0].resources.limits.memory' "$D/patched.json")
envs=()
while IFS= read -r kv; do envs+=(--env "$kv"); done < <(jq -r '.spec.containers[0].env[] | "\(.name)=\(.value)"' "$D/patched.json")
it_log "the webhook's patch: sizeLimit $limit, limits.memory $memory, env ${envs[*]}"
assert_eq 1088Mi "$memory" "the webhook raised the memory limit by the 64 MiB"
assert_eq 544Mi "$limit" "...and wrote the guard's ceiling, the budget of 1088Mi, as the sizeLimit"
ed=$D/kubelet/pods/$(cat /proc/sys/kernel/random/uuid)/volumes/kubernetes.io~empty-dir/gpu-run-shm
mkdir -p "$ed" && mount -t tmpfs -o size=544m tmpfs "$ed" || it_die "cannot mount the emptyDir tmpfs"
it_cri pod --name webhooked --memory $((1088 << 20)) "${envs[@]}" --mount "$ed:/dev/shm" >"$D/e.json" 2>"$D/e.err" ||
  it_die "the emptyDir pod did not start: $(cat "$D/e.err")"
e=$(jq -r '.containers[0]' "$D/e.json")
for _ in $(seq 100); do grep -q "guard: container c0: /dev/shm 544MiB -> 64MiB" "$D/guard.err" && break; sleep 0.02; done
assert_contains "$(grep "(${e:0:12})" "$D/guard.err")" "from the plan's 64MiB up to its sizeLimit 544MiB, never past" \
  "the emptyDir pod is guarded between the plan and its sizeLimit"
assert_contains "$(cat "$D/guard.err")" "guard: container c0: /dev/shm 544MiB -> 64MiB (the plan" \
  "the guard lowered the kubelet's 544 MiB tmpfs to the plan"
assert_eq 65536 "$(it_cri exec "$e" df -k /dev/shm | awk 'NR == 2 { print $2 }')" "df in the container: 64 MiB"
out=$(it_cri exec "$e" sh -c 'i=0; while [ $i -lt 30 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.15; done; df -k /dev/shm | tail -n 1')
assert_eq 0 "$?" "the emptyDir pod wrote 240 MiB into its 64 MiB /dev/shm (exit 0)"
kb=$(printf '%s\n' "$out" | awk '{ print $2 }')
[[ ${kb:-0} -ge $((240 * 1024)) && ${kb:-0} -le $((544 * 1024)) ]] &&
  it_pass "df in the container: grown to $kb KiB, within the sizeLimit" || it_fail "df in the container: [$out]"
# On past the sizeLimit: the guard stops there, so the write fails and the use never passes it.
it_cri exec "$e" sh -c 'i=30; while [ $i -lt 80 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.1; done' >/dev/null 2>&1
assert_eq 1 "$?" "writing 640 MiB fails at the sizeLimit"
df=$(it_cri exec "$e" df -k /dev/shm | awk 'NR == 2 { print $2, $3 }')
assert_eq "$((544 * 1024))" "${df% *}" "df in the container: 544 MiB, the sizeLimit, not more"
[[ ${df#* } -le $((544 * 1024)) ]] && it_pass "its use (${df#* } KiB) never passes the sizeLimit: no eviction" ||
  it_fail "use past the sizeLimit: $df"
assert_contains "$(grep "container c0" "$D/guard.err")" "it is at its emptyDir's sizeLimit 544MiB" \
  "the guard says the sizeLimit stopped it"
sleep 0.3
curl -s "http://127.0.0.1:$gport/metrics" >"$D/e.prom"
refused=$(awk -v id="$e" 'index($0, "gpu_run_shm_growths_refused_total{") == 1 && index($0, id) { print $NF }' "$D/e.prom")
[[ ${refused:-0} -ge 1 ]] && it_pass "its refused growths are counted ($refused): what an alert on a full /dev/shm that cannot grow reads" ||
  it_fail "no refused growth in its series: $(grep "$e" "$D/e.prom")"
it_cri rm-pod "$(jq -r .pod "$D/e.json")" >/dev/null 2>&1

# ------------------------------------------------------------ how soon a pod is guarded
stopped_before=$(grep -c "stopped guarding container c0 " "$D/guard.err")
: >"$D/latency"
for ((i = 0; i < N; i++)); do
  it_cri pod --name "p$i" --env GPU_RUN_SHM_SIZE=64m >"$D/p.json" 2>"$D/p.err" || it_die "pod p$i: $(cat "$D/p.err")"
  t0=$(date +%s%N)
  id=$(jq -r '.containers[0]' "$D/p.json")
  for _ in $(seq 500); do
    grep -q "guarding container c0 (${id:0:12})" "$D/guard.err" && break
    sleep 0.001
  done
  t1=$(date +%s%N)
  grep -q "guarding container c0 (${id:0:12})" "$D/guard.err" && echo $(((t1 - t0) / 1000)) >>"$D/latency" ||
    echo 99999999 >>"$D/latency"
  jq -r .pod "$D/p.json" >>"$D/pods"
done
read -r p50 p99 < <(python3 - "$D/latency" <<'PY'
import sys
v = sorted(int(x) / 1000 for x in open(sys.argv[1]))
print(f"{v[len(v) // 2]:.1f} {v[min(len(v) - 1, int(len(v) * 0.99))]:.1f}")
PY
)
it_log "$N pods: guarded after StartContainer returned: p50 $p50 ms, p99 $p99 ms"
python3 -c "import sys; sys.exit(0 if $p99 <= 100 else 1)" &&
  it_pass "$N pods each guarded within 100 ms of StartContainer (p50 $p50 ms, p99 $p99 ms)" ||
  it_fail "a pod was guarded more than 100 ms after StartContainer (p50 $p50 ms, p99 $p99 ms)"
# shellcheck disable=SC2046
it_cri rm-pod $(cat "$D/pods") >/dev/null 2>&1
for _ in $(seq 100); do
  [[ $(($(grep -c "stopped guarding container c0 " "$D/guard.err") - stopped_before)) -ge $N ]] && break
  sleep 0.05
done
assert_eq "$N" "$(($(grep -c "stopped guarding container c0 " "$D/guard.err") - stopped_before))" \
  "the guard stopped guarding every removed pod, once"
it_log "$(grep "stopped guarding" "$D/guard.err" | head -n 4)"

# ------------------------------------------------------------ a pod removed mid-growth
lines_before=$(wc -l <"$D/guard.err")
it_cri pod --name victim --env GPU_RUN_SHM_SIZE=64m >"$D/v.json" 2>/dev/null || it_die "pod victim did not start"
v=$(jq -r '.containers[0]' "$D/v.json")
it_cri exec "$v" sh -c 'i=0; while [ $i -lt 30 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.1; done' >/dev/null 2>&1 &
writer=$!
sleep 1.5
it_cri rm-pod "$(jq -r .pod "$D/v.json")" >/dev/null 2>&1
wait "$writer" 2>/dev/null
sleep 0.5
kill -0 "$guard" 2>/dev/null && it_pass "the guard runs on after a pod removed mid-growth" ||
  it_fail "the guard died after a pod was removed mid-growth"
assert_not_contains "$(tail -n +$((lines_before + 1)) "$D/guard.err")" "warning" "no warning from the guard for it"
assert_not_contains "$(tail -n +$((lines_before + 1)) "$D/guard.err")" "error" "no error from the guard for it"

kill -TERM "$guard"
rc=0
wait "$guard" || rc=$?
assert_eq 0 "$rc" "SIGTERM ends the guard with exit 0"
it_log "the guard's stderr:"$'\n'"$(cat "$D/guard.err")"
it_done
