#!/usr/bin/env bash
# The guard's and the webhook's /metrics as a real Prometheus sees them (Debian's prometheus
# package): `promtool check metrics` on both (a guarded container's series included), then a
# Prometheus server scraping the guard every second, and a query to its HTTP API for a container's
# /dev/shm used bytes by its container_name label, compared with df inside the container.
# Usage: prometheus_test.sh [PATH/TO/gpu-run]   (the other binaries next to it, or in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker curl python3 openssl
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
  it_skip "prometheus and promtool are needed (apt-get install prometheus; scripts/install-deps installs it)"
it_binaries "${1:-}" gpu-run-ctl gpu-run-webhook
CTL=$IT_BIN/gpu-run-ctl

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_isolate_config "$work" "{\"log_file\": \"$work/gpu-run.log\"}"
d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

pids=()
# shellcheck disable=SC2317  # called through it_on_exit
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; true; }
it_on_exit stop_all
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ------------------------------------------------------------ the guard, one container
gport=$(free_port)
"$CTL" guard --metrics "127.0.0.1:$gport" 2>"$work/guard.err" &
pids+=($!)
# 40 MiB in its 64 MiB /dev/shm, then it waits.
docker run -d --name scraped --shm-size 64m --label gpu-run.shm-size=64m "$IMAGE" \
  sh -c 'head -c 41943040 /dev/zero >/dev/shm/f; sleep 120' >/dev/null || it_die "docker run failed"
for _ in $(seq 100); do grep -q "guard: guarding container scraped (" "$work/guard.err" && break; sleep 0.1; done
for _ in $(seq 100); do
  curl -s "http://127.0.0.1:$gport/metrics" >"$work/guard.prom"
  grep -q 'gpu_run_shm_used_bytes{.*container_name="scraped"' "$work/guard.prom" && break
  sleep 0.1
done
assert_contains "$(cat "$work/guard.prom")" 'container_name="scraped"' "the guard's /metrics has the container's series"
if promtool check metrics <"$work/guard.prom" >"$work/promtool.out" 2>&1; then
  it_pass "promtool check metrics: the guard's /metrics passes"
else
  it_fail "promtool check metrics on the guard's /metrics: $(cat "$work/promtool.out")"
fi
version=$("$CTL" --version | awk '{ print $2 }')
assert_contains "$(cat "$work/guard.prom")" "gpu_run_guard_build_info{version=\"$version\"} 1" \
  "the guard's /metrics has its build info, the version of gpu-run-ctl --version"
now=$(date +%s)
sampled=$(awk '$1 == "gpu_run_guard_last_sample_timestamp_seconds" { print $2 }' "$work/guard.prom")
discovered=$(awk '$1 == "gpu_run_guard_last_discovery_timestamp_seconds" { print $2 }' "$work/guard.prom")
python3 -c "import sys; n, s, d = map(float, sys.argv[1:]); sys.exit(0 if abs(n - s) < 5 and abs(n - d) < 5 else 1)" \
  "$now" "${sampled:-0}" "${discovered:-0}" &&
  it_pass "its last sample and last discovery pass are timestamped now ($sampled, $discovered; date +%s $now)" ||
  it_fail "last sample [$sampled], last discovery [$discovered], now $now"

# ------------------------------------------------------------ the webhook's /metrics
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/tls.key" -out "$work/tls.crt" -days 1 \
  -subj "/CN=gpu-run-webhook" -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1 || it_die "openssl req failed"
GPU_RUN_BUILTIN_PROFILES=$here/../../profiles "$IT_BIN/gpu-run-webhook" --listen 127.0.0.1:0 --tls-cert "$work/tls.crt" \
  --tls-key "$work/tls.key" 2>"$work/webhook.err" &
pids+=($!)
wport=
for _ in $(seq 100); do
  wport=$(sed -n 's/.*event=listening .* port=\([0-9]*\).*/\1/p' "$work/webhook.err")
  [[ -n $wport ]] && break
  sleep 0.05
done
[[ -n $wport ]] || it_die "the webhook did not start: $(cat "$work/webhook.err")"
# One review, so its counters and histogram have samples.
python3 - "$wport" "$work/tls.crt" <<'PY' || it_fail "a review to the webhook failed"
import http.client, json, ssl, sys
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml",
       "annotations": {"gpu-run.profile": "imagenet"}},
       "spec": {"containers": [{"name": "t", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                      "resource": {"group": "", "version": "v1", "resource": "pods"},
                      "namespace": "ml", "operation": "CREATE", "object": pod}}
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ssl.create_default_context(cafile=sys.argv[2]))
c.request("POST", "/mutate", json.dumps(review), {"Content-Type": "application/json"})
sys.exit(0 if c.getresponse().status == 200 else 1)
PY
curl -s --cacert "$work/tls.crt" "https://127.0.0.1:$wport/metrics" >"$work/webhook.prom"
assert_contains "$(cat "$work/webhook.prom")" "gpu_run_webhook_reviews_total" "the webhook's /metrics has its review counter"
if promtool check metrics <"$work/webhook.prom" >"$work/promtool.out" 2>&1; then
  it_pass "promtool check metrics: the webhook's /metrics passes"
else
  it_fail "promtool check metrics on the webhook's /metrics: $(cat "$work/promtool.out")"
fi

# ------------------------------------------------------------ Prometheus scrapes the guard
pport=$(it_prometheus_start "$work" "127.0.0.1:$gport")
pids+=("$(cat "$work/prometheus.pid")")
assert_eq 1 "$(it_prometheus_value "$pport" "gpu_run_guard_build_info{version=\"$version\"}")" \
  "Prometheus answers gpu_run_guard_build_info{version=\"$version\"} with 1"
query='gpu_run_shm_used_bytes{job="gpu-run-guard",container_name="scraped"}'
value=$(it_prometheus_value "$pport" "$query")
[[ -n $value ]] || it_fail "Prometheus answered no $query; its log: $(tail -n 5 "$work/prometheus.log")"
df_used=$(docker exec scraped df -k /dev/shm | awk '$NF == "/dev/shm" { print $3 * 1024 }')
it_log "Prometheus: $query = $value; df inside the container: $df_used bytes used"
if [[ -n $value && -n $df_used ]] && python3 -c "import sys; sys.exit(0 if abs($value - $df_used) <= 1048576 else 1)"; then
  it_pass "Prometheus' answer ($value bytes) is what df in the container says ($df_used)"
else
  it_fail "Prometheus said [$value] bytes, df in the container [$df_used]"
fi
docker rm -f scraped >/dev/null
it_done
