#!/usr/bin/env bash
# gpu-run-ctl guard --engine containerd on a Kubernetes-like node: pods run through the CRI gRPC
# API as the kubelet runs them, against Debian's containerd started privately, and the guard
# finds their containers by watching containerd's task directories (no engine CLI polled).
# A pod's container whose /dev/shm is containerd's 64 MiB sandbox tmpfs writes 240 MiB into it
# and finishes; its series carry namespace, pod and container (promtool checks them, a real
# Prometheus answers a query by them); N pods started one after another are each guarded
# within 100 ms of StartContainer (p99 reported); a pod removed in the middle of its writes
# leaves the guard running without a warning. A pod whose /dev/shm is a kubelet emptyDir as the
# real webhook writes it stays at its sizeLimit (never lowered to the plan, never grown past it)
# and writes 240 MiB with the guard running, then again with the guard stopped, and a restarted
# guard leaves it there too. GET /healthz and /readyz answer 200 while the guard's loops run, and
# 503 naming the discovery while it hangs on a `docker inspect` that never returns (a Docker task
# in containerd's moby namespace, a stand-in docker that sleeps), while /metrics still answers.
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
# A docker that never answers: the guard asks it about a moby task (below, a stuck discovery).
mkdir -p "$D/stub"
printf '#!/bin/sh\necho $$ >>"%s"\nexec sleep 600\n' "$D/docker.calls" >"$D/stub/docker"
chmod +x "$D/stub/docker"
# shellcheck disable=SC2317  # called through it_on_exit
stop_stub() {
  [[ -f $D/docker.calls ]] && while read -r p; do kill "$p" 2>/dev/null; done <"$D/docker.calls"
  ctr -a "$IT_CRI_SOCK" -n moby tasks kill -s KILL hang >/dev/null 2>&1
  sleep 0.2
  ctr -a "$IT_CRI_SOCK" -n moby tasks delete -f hang >/dev/null 2>&1
  ctr -a "$IT_CRI_SOCK" -n moby containers rm hang >/dev/null 2>&1
  true
}
it_on_exit stop_stub
gport=$(free_port)
PATH="$D/stub:$PATH" "$CTL" guard --engine containerd --containerd-state "$D/state" --metrics "127.0.0.1:$gport" \
  2>"$D/guard.err" &
guard=$!
pids+=("$guard")
for _ in $(seq 100); do grep -q "guard: guarding the containerd" "$D/guard.err" && break; sleep 0.05; done
# probe PATH: the HTTP status, then the body on one line.
probe() {
  local out
  out=$(curl -s -w '\n%{http_code}' "http://127.0.0.1:$gport$1")
  printf '%s %s' "${out##*$'\n'}" "$(tr '\n' ' ' <<<"${out%$'\n'*}")"
}
for _ in $(seq 50); do [[ $(probe /readyz) == 200* ]] && break; sleep 0.05; done
health=$(probe /healthz)
assert_contains "$health" "200 ok sampler: last pass " "GET /healthz: 200 on a running guard"
assert_contains "$health" "discovery: last pass " "...with the age of each loop's last pass ($health)"
assert_contains "$(probe /readyz)" "200 ok " "GET /readyz: 200 once both loops have made a pass"


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
assert_eq "gpu-run-webhook $((64 << 20)) $((544 << 20))" \
  "$(jq -r '.metadata.annotations["gpu-run.decision"] | fromjson | "\(.door) \(.size) \(.ceiling)"' "$D/patched.json")" \
  "...and recorded its decision once, in the pod's gpu-run.decision: the plan, and the sizeLimit as its ceiling"
ed=$D/kubelet/pods/$(cat /proc/sys/kernel/random/uuid)/volumes/kubernetes.io~empty-dir/gpu-run-shm
mkdir -p "$ed" && mount -t tmpfs -o size=544m tmpfs "$ed" || it_die "cannot mount the emptyDir tmpfs"
it_cri pod --name webhooked --memory $((1088 << 20)) "${envs[@]}" --mount "$ed:/dev/shm" >"$D/e.json" 2>"$D/e.err" ||
  it_die "the emptyDir pod did not start: $(cat "$D/e.err")"
e=$(jq -r '.containers[0]' "$D/e.json")
for _ in $(seq 100); do grep -q "guarding container c0 (${e:0:12})" "$D/guard.err" && break; sleep 0.02; done
assert_contains "$(grep "(${e:0:12})" "$D/guard.err")" \
  "a memory-backed emptyDir (the plan 64MiB), never made smaller, grown up to its sizeLimit 544MiB, never past" \
  "the emptyDir pod is guarded up to its sizeLimit, never made smaller"
assert_contains "$(grep "(${e:0:12})" "$D/guard.err")" "recorded by gpu-run-webhook in its environment" \
  "...read from the record the webhook put in GPU_RUN_DECISION (no pod annotation reaches a plain runc's spec)"
sleep 0.5 # about 50 samples of it
assert_eq $((544 * 1024)) "$(it_cri exec "$e" df -k /dev/shm | awk 'NR == 2 { print $2 }')" \
  "df in the container with the guard running: 544 MiB, its sizeLimit (not lowered to the 64 MiB plan)"
# write_240 POD: 30 files of 8 MiB into /dev/shm, then its df line.
write_240() {
  it_cri exec "$1" sh -c 'rm -f /dev/shm/f*; i=0; while [ $i -lt 30 ]; do
    head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1; i=$((i+1)); sleep 0.05; done; df -k /dev/shm | tail -n 1'
}
out=$(write_240 "$e")
assert_eq 0 "$?" "the emptyDir pod wrote 240 MiB with the guard running (exit 0)"
assert_eq $((544 * 1024)) "$(printf '%s\n' "$out" | awk '{ print $2 }')" "df in the container: still its 544 MiB sizeLimit"
assert_not_contains "$(cat "$D/guard.err")" "/dev/shm 544MiB -> " "the guard never remounted it"
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
it_cri exec "$e" sh -c 'rm -f /dev/shm/f*' # the pod stays: it writes again once the guard is stopped (the end)

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

# ------------------------------------------------------------ a stuck discovery fails the probe
# A Docker task in containerd's moby namespace is asked of `docker inspect`, which here never
# answers: the discovery hangs there while the sampler goes on.
ctr -a "$IT_CRI_SOCK" -n moby run -d --rootfs "$IT_ROOTFS" hang /bin/sleep 600 >/dev/null 2>"$D/ctr.err" ||
  it_die "ctr run in the moby namespace: $(cat "$D/ctr.err")"
for _ in $(seq 100); do [[ -s $D/docker.calls ]] && break; sleep 0.05; done
assert_eq 1 "$([[ -s $D/docker.calls ]] && echo 1)" "the guard asked the stand-in docker about the moby task"
t0=$(date +%s%N)
for _ in $(seq 200); do [[ $(probe /healthz) == 503* ]] && break; sleep 0.1; done
t1=$(date +%s%N)
health=$(probe /healthz)
assert_contains "$health" "503 " "GET /healthz: 503 while the discovery is stuck ($(((t1 - t0) / 1000000)) ms after the hang began)"
assert_contains "$health" "stale: discovery" "...naming the discovery"
assert_not_contains "$health" "stale: sampler" "...not the sampler, which still runs"
assert_contains "$(probe /readyz)" "503 " "GET /readyz: 503 too"
curl -sf "http://127.0.0.1:$gport/metrics" >"$D/stuck1.prom"
assert_eq 0 "$?" "GET /metrics still answers (what the old probe read)"
sleep 1
curl -sf "http://127.0.0.1:$gport/metrics" >"$D/stuck2.prom"
last() { awk -v m="$1" '$1 == m { print $2 }' "$2"; }
python3 -c "import sys; a, b, c, d = map(float, sys.argv[1:]); sys.exit(0 if b > a and d == c else 1)" \
  "$(last gpu_run_guard_last_sample_timestamp_seconds "$D/stuck1.prom")" \
  "$(last gpu_run_guard_last_sample_timestamp_seconds "$D/stuck2.prom")" \
  "$(last gpu_run_guard_last_discovery_timestamp_seconds "$D/stuck1.prom")" \
  "$(last gpu_run_guard_last_discovery_timestamp_seconds "$D/stuck2.prom")" &&
  it_pass "the metrics: the last sample's timestamp moves on, the last discovery's stands still" ||
  it_fail "timestamps: $(grep -h '^gpu_run_guard_last' "$D/stuck1.prom" "$D/stuck2.prom" | tr '\n' ' ')"
while read -r p; do kill "$p" 2>/dev/null; done <"$D/docker.calls" # docker answers at last (killed)
for _ in $(seq 50); do [[ $(probe /healthz) == 200* ]] && break; sleep 0.1; done
assert_contains "$(probe /healthz)" "200 " "GET /healthz: 200 again once the inspect returned"
stop_stub

kill -TERM "$guard"
rc=0
wait "$guard" || rc=$?
assert_eq 0 "$rc" "SIGTERM ends the guard with exit 0"
it_log "the guard's stderr:"$'\n'"$(cat "$D/guard.err")"

# ------------------------------------------------------------ the emptyDir pod without the guard
out=$(write_240 "$e")
assert_eq 0 "$?" "with the guard stopped, the emptyDir pod wrote 240 MiB (exit 0)"
assert_eq $((544 * 1024)) "$(printf '%s\n' "$out" | awk '{ print $2 }')" "df in the container: its 544 MiB sizeLimit"
# A restarted guard resumes it from its state and leaves it there too.
"$CTL" guard --engine containerd --containerd-state "$D/state" 2>"$D/guard2.err" &
guard=$!
pids+=("$guard")
for _ in $(seq 100); do grep -q "guarding container c0 (${e:0:12})" "$D/guard2.err" && break; sleep 0.05; done
assert_contains "$(grep "(${e:0:12})" "$D/guard2.err")" "resumed from the last guard" "a restarted guard resumes the emptyDir pod"
sleep 0.5
assert_eq $((544 * 1024)) "$(it_cri exec "$e" df -k /dev/shm | awk 'NR == 2 { print $2 }')" \
  "df in the container under the restarted guard: still 544 MiB"
kill -TERM "$guard"
wait "$guard"
it_cri rm-pod "$(jq -r .pod "$D/e.json")" >/dev/null 2>&1
it_done
