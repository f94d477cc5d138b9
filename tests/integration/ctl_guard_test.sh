#!/usr/bin/env bash
# gpu-run-ctl guard, the node service, against containers of a private dockerd: a labelled
# busybox container that writes 96 MiB into a 64 MiB /dev/shm finishes because the guard grows
# it (one host log line and one stderr line per growth); an unlabelled one is passed over, said
# (and fails) without --all and is guarded with --all; a container planned from its GPU_RUN_*
# environment keeps one batch per worker free; a guarded container removed mid-sample does not
# stop the guard; SIGTERM ends it with exit 0. --metrics: the Prometheus text scraped with curl
# over TCP (IPv4, IPv6) and a unix socket matches df inside the container, ten clients that
# connect and never send or read stall neither the guard nor the next scrape, and the guard
# under podman grows a container too. A second guard on the host refuses to run. The guard watches
# each engine's container directories (dockerd's containerd tasks, podman's run root): a container
# that lives 1 s is guarded, which the 2 s poll of `<engine> ps` often missed; where dockerd cannot be
# found (DOCKER_HOST through a proxy socket) it says so and polls.
# Usage: ctl_guard_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is looked up next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker curl python3 podman conmon

it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl
it_log "testing $CTL"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
hostlog=$work/gpu-run.log
it_isolate_config "$work" "{\"log_file\": \"$hostlog\", \"guard\": {\"min_free_fraction\": 0.25, \"step_fraction\": 0.5}}"

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

# 12 x 8 MiB into /dev/shm, one file every 0.3 s (after 3 s), then
# the file count and df. 96 MiB do not fit in 64 MiB: head fails with ENOSPC without the guard.
FILL='sleep 3; i=0; while [ $i -lt 12 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.3; done; sleep 2; ls /dev/shm | wc -l; df -k /dev/shm'

it_guard_setup "$CTL" "$work"
run_fill() { docker run -d --shm-size 64m "$@" "$IMAGE" sh -c "$FILL" >/dev/null || it_die "docker run $* failed"; }
# NAME: the container's /dev/shm size in KiB as its last df said.
df_kb() { docker logs "$1" 2>/dev/null | awk '$NF == "/dev/shm" { print $2 }'; }
files() { docker logs "$1" 2>/dev/null | head -n 1; }
growths_of() { grep -c "gpu-run-ctl: guard: container $1: /dev/shm " "$work/guard.err" || true; }

# ------------------------------------------------------------ wrong requests
assert_exit 2 "$CTL" guard --engine rkt
assert_contains "$IT_ERR" "--engine 'rkt'" "--engine rkt refused"
assert_exit 2 "$CTL" guard --interval 0
assert_contains "$IT_ERR" "--interval 0" "--interval 0 refused"

# ------------------------------------------------------------ labelled only
it_guard_start
# One node guard a host: a second one refuses (two would each count only their own growths).
assert_exit 1 "$CTL" guard
assert_contains "$IT_ERR" "another gpu-run-ctl guard runs on this host" "a second guard refuses to run"
it_guard_wait_for "watching docker's containers as they start (" "docker: dockerd's container directories watched"
assert_contains "$(cat "$work/guard.err")" "$d/exec/containerd/daemon/io.containerd.runtime.v2.task, containerd namespace moby" \
  "docker: the task directory of the containerd dockerd started under its --exec-root"
run_fill --name labelled --label gpu-run.shm-size=64m
run_fill --name plain
# A container of 1 s, gone before a 2 s poll would have listed it most of the time.
docker run -d --name brief --shm-size 64m --label gpu-run.shm-size=64m "$IMAGE" sleep 1 >/dev/null ||
  it_die "docker run brief"
it_guard_wait_for "guarding container brief (" "brief: a 1 s container guarded"
it_guard_wait_for "stopped guarding container brief (" "brief: and no longer once it exited"
docker rm -f brief >/dev/null
it_guard_wait_for "guarding container labelled" "labelled: picked up"
assert_eq 0 "$(docker wait labelled)" "labelled: wrote 96 MiB into a 64 MiB /dev/shm (exit 0)"
assert_eq 12 "$(files labelled)" "labelled: all 12 files are there"
kb=$(df_kb labelled)
[[ ${kb:-0} -gt 98304 ]] && it_pass "labelled: df inside shows /dev/shm grown to $kb KiB" ||
  it_fail "labelled: df shows [$kb] KiB"
assert_eq 1 "$(docker wait plain)" "plain: not guarded without --all, ran out of /dev/shm (exit 1)"
assert_contains "$(grep -F "container plain (" "$work/guard.err")" "not guarding container plain (" \
  "plain: passed over, and said so (the one admission rule for every engine)"
assert_not_contains "$(cat "$work/guard.err")" "guard: guarding container plain (" "plain: never guarded"
it_guard_wait_for "stopped guarding container labelled" "labelled: guarding stops when it exits"
grew=$(grep -c 'action=resized by=guard' "$hostlog" || true)
[[ $grew -ge 1 ]] && it_pass "labelled: $grew growth line(s) in the host log" || it_fail "no growth in $hostlog"
assert_eq "$grew" "$(growths_of labelled)" "labelled: one stderr line per logged growth"
assert_contains "$(head -n 1 "$hostlog")" "before=64m" "labelled: the first growth is from 64m"
assert_contains "$(cat "$hostlog")" "container=$(docker inspect -f '{{.Id}}' labelled) action=resized" \
  "labelled: the host log names the container"
it_log "host log:"$'\n'"$(cat "$hostlog")"
it_guard_stop "labelled only"

# ------------------------------------------------------------ --all
: >"$hostlog"
it_guard_start --all --interval 5
assert_contains "$(cat "$work/guard.err")" "guarding every running docker container" "--all: says what it guards"
run_fill --name plain2
# Planned from its environment: imagenet, 2 workers x 96 images (55 MiB a batch).
docker run -d --name planned --shm-size 64m --label gpu-run.profile=imagenet -e GPU_RUN_PROFILE=imagenet \
  -e GPU_RUN_NUM_WORKERS=2 -e GPU_RUN_BATCH_SIZE=96 "$IMAGE" sleep 300 >/dev/null || it_die "docker run planned"
docker run -d --name victim --shm-size 64m "$IMAGE" sleep 300 >/dev/null || it_die "docker run victim"
it_guard_wait_for "guarding container planned" "planned: picked up"
assert_contains "$(cat "$work/guard.err")" "keeps 110.3MiB free (profile imagenet, 2 workers x a batch of 96)" \
  "planned: the plan's headroom, one batch per worker"
it_guard_wait_for "gpu-run-ctl: guard: container planned: /dev/shm 64MiB -> " "planned: grown at once (64 MiB < 110 MiB free)"
it_guard_wait_for "guarding container victim" "victim: picked up"
docker rm -f victim >/dev/null
assert_eq 0 "$(docker wait plain2)" "--all: the unlabelled container wrote its 96 MiB (exit 0)"
assert_eq 12 "$(files plain2)" "--all: all 12 files are there"
kb=$(df_kb plain2)
[[ ${kb:-0} -gt 98304 ]] && it_pass "--all: df inside shows /dev/shm grown to $kb KiB" ||
  it_fail "--all: df shows [$kb] KiB"
[[ $(growths_of plain2) -ge 1 ]] && it_pass "--all: $(growths_of plain2) growth line(s) for plain2" ||
  it_fail "--all: no growth for plain2"
it_guard_wait_for "stopped guarding container victim" "victim: removed mid-sample, guarding stops"
kill -0 "$IT_GUARD_PID" 2>/dev/null && it_pass "the guard survives a container removed under it" ||
  it_fail "the guard died"
assert_not_contains "$(cat "$work/guard.err")" "terminate" "no crash in the guard's stderr"
it_guard_stop "--all"
docker rm -f planned >/dev/null

# ------------------------------------------------------------ --metrics
assert_exit 2 "$CTL" guard --metrics 0.0.0.0:9400
assert_contains "$IT_ERR" "add --metrics-public" "--metrics on a non-loopback address needs --metrics-public"
assert_exit 2 "$CTL" guard --metrics 9400
assert_contains "$IT_ERR" "expected 127.0.0.1:PORT, [::1]:PORT or unix:/PATH" "--metrics 9400 refused, says what to give"
assert_exit 2 "$CTL" guard --metrics-public
assert_contains "$IT_ERR" "give --metrics ADDR too" "--metrics-public alone refused"
touch "$work/not-a-socket"
assert_exit 1 "$CTL" guard --metrics "unix:$work/not-a-socket"
assert_contains "$IT_ERR" "exists and is not a socket" "--metrics on a regular file refused"
assert_eq "" "$(cat "$work/not-a-socket")" "the file is left as it was"

# Without the server module next to it (<bin>/../lib/gpu-run): exit 1, saying what to install.
mkdir -p "$work/nomodule/bin"
cp "$CTL" "$work/nomodule/bin/"
assert_exit 1 "$work/nomodule/bin/gpu-run-ctl" guard --metrics 127.0.0.1:9
assert_contains "$IT_ERR" "gpu-run-metrics-http.so, which is missing" "--metrics without the module: says so"
assert_contains "$IT_ERR" "gpu-run-metrics package" "--metrics without the module: says how to install it"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
: >"$hostlog"
it_guard_start --metrics "127.0.0.1:$port"
assert_contains "$(cat "$work/guard.err")" "metrics at http://127.0.0.1:$port/metrics" "--metrics: says where"
# Ten clients that connect, and never send or read, held for 10 s (the server's threads wait 2 s each).
python3 - "$port" 10 >"$work/idle.out" 2>&1 <<'PY' &
import socket, sys, time
conns = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(10)]
# One of them sends a request and never reads the answer.
conns[0].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
print("connected", flush=True)
time.sleep(float(sys.argv[2]))
PY
idle_pid=$!
for _ in $(seq 50); do grep -q connected "$work/idle.out" && break; sleep 0.1; done
assert_contains "$(cat "$work/idle.out")" "connected" "--metrics: ten idle clients connected"
# 56 MiB in a 64 MiB /dev/shm leaves 8 MiB free, below 25%: the guard grows it to 96 MiB, but
# not while a gpu-run-ctl resize of it holds the container's lock (the test holds it for 3 s).
id=$(docker create --name scraped --shm-size 64m --label gpu-run.profile=imagenet "$IMAGE" \
  sh -c 'head -c 58720256 /dev/zero >/dev/shm/data && sleep 300') || it_die "docker create scraped"
mkdir -p /run/gpu-run/resize
exec {held}>"/run/gpu-run/resize/$id.lock"
flock "$held"
docker start scraped >/dev/null || it_die "docker start scraped"
it_guard_wait_for "guarding container scraped" "scraped: picked up"
sleep 1
assert_not_contains "$(cat "$work/guard.err")" "container scraped: /dev/shm 64MiB" \
  "scraped: no growth while a resize holds the container's lock"
exec {held}>&-
it_guard_wait_for "gpu-run-ctl: guard: container scraped: /dev/shm 64MiB -> 96MiB" "scraped: grown once the lock is free"
kill -0 "$idle_pid" 2>/dev/null && it_pass "--metrics: the growth came while the idle clients were connected" ||
  it_fail "--metrics: the idle clients were gone before the growth"
# The growth comes as the use crosses 48 MiB, while the container still writes: the numbers are
# compared once its 56 MiB are written (and sampled: the sampler passes every 10 ms).
for _ in $(seq 1 100); do
  [[ $(docker exec scraped stat -c %s /dev/shm/data 2>/dev/null) == 58720256 ]] && break
  sleep 0.1
done
sleep 0.1
t0=$(date +%s%N)
metrics=$(curl -sS --max-time 10 "http://127.0.0.1:$port/metrics")
ms=$((($(date +%s%N) - t0) / 1000000))
[[ -n $metrics ]] && it_pass "--metrics: curl scraped /metrics in $ms ms with ten idle clients connected" ||
  it_fail "--metrics: curl got nothing"
wait "$idle_pid"
it_log "metrics:"$'\n'"$metrics"
labels="container_id=\"$id\",container_name=\"scraped\",profile=\"imagenet\",engine=\"docker\""
metric() { awk -v k="$1{$labels}" '$1 == k { print $2 }' <<<"$metrics"; }
read -r size_kb used_kb < <(docker exec scraped df -k /dev/shm | awk '$NF == "/dev/shm" { print $2, $3 }')
assert_eq $((size_kb * 1024)) "$(metric gpu_run_shm_size_bytes)" "--metrics: size_bytes is df's size inside ($size_kb KiB)"
assert_eq $((used_kb * 1024)) "$(metric gpu_run_shm_used_bytes)" "--metrics: used_bytes is df's used inside ($used_kb KiB)"
assert_eq $((used_kb * 1024)) "$(metric gpu_run_shm_peak_bytes)" "--metrics: peak_bytes is the most it held"
assert_eq 1 "$(metric gpu_run_shm_growths_total)" "--metrics: one growth"
assert_eq 0 "$(metric gpu_run_shm_growths_refused_total)" "--metrics: no refused growth"
assert_contains "$metrics" $'# TYPE gpu_run_shm_growths_total counter\n' "--metrics: TYPE lines"
assert_contains "$metrics" "gpu_run_guard_containers 1" "--metrics: one container guarded"
assert_contains "$(curl -sS -o /dev/null -w '%{content_type}' "http://127.0.0.1:$port/metrics")" \
  "text/plain; version=0.0.4" "--metrics: the text format's content type"
# The orphaned bytes, counted off the sampler every 10 s: /dev/shm/data is no engine's segment and
# an NCCL segment held open is no orphan, so 0 (an orphan must be unchanged for 60 s: the unit
# test ShmWithSegments counts one).
docker exec -d scraped sh -c 'head -c 1048576 /dev/zero >/dev/shm/nccl-HeLd12 && exec sleep 300 3</dev/shm/nccl-HeLd12' ||
  it_fail "docker exec: an NCCL segment held open"
orphaned=
for _ in $(seq 1 30); do
  metrics=$(curl -sS --max-time 10 "http://127.0.0.1:$port/metrics")
  orphaned=$(metric gpu_run_shm_orphaned_bytes)
  [[ -n $orphaned ]] && break
  sleep 1
done
assert_eq 0 "$orphaned" "--metrics: orphaned_bytes counted within 30 s, 0 (no engine's segment without a holder)"
kill -KILL "$IT_GUARD_PID"
wait "$IT_GUARD_PID" 2>/dev/null
IT_GUARD_PID=

# A unix socket: a killed guard's stale socket is replaced, SIGTERM removes it.
sock=$work/metrics.sock
for round in 1 2; do
  it_guard_start --metrics "unix:$sock"
  it_guard_wait_for "guarding container scraped" "unix round $round: picked up"
  [[ -S $sock ]] && it_pass "unix round $round: the socket is there" || it_fail "unix round $round: no socket $sock"
  metrics=$(curl -sS --max-time 10 --unix-socket "$sock" http://localhost/metrics)
  read -r size_kb used_kb < <(docker exec scraped df -k /dev/shm | awk '$NF == "/dev/shm" { print $2, $3 }')
  assert_eq $((size_kb * 1024)) "$(metric gpu_run_shm_size_bytes)" "unix round $round: size_bytes is df's"
  assert_eq $((used_kb * 1024)) "$(metric gpu_run_shm_used_bytes)" "unix round $round: used_bytes is df's"
  if [[ $round == 1 ]]; then
    kill -KILL "$IT_GUARD_PID"
    wait "$IT_GUARD_PID" 2>/dev/null
    IT_GUARD_PID=
  fi
done
it_guard_stop "unix socket"
[[ ! -e $sock ]] && it_pass "SIGTERM removes the socket" || it_fail "$sock left behind"

# ------------------------------------------------------------ the CLI poll, when dockerd cannot be found
# DOCKER_HOST through a proxy socket: no dockerd serves it, so the guard cannot find dockerd's
# flags; it says so and polls `docker ps` (through the proxy), which still finds the container.
python3 - "$work/proxy.sock" "$d/docker.sock" <<'PY' &
import socket, sys, threading
srv = socket.socket(socket.AF_UNIX)
srv.bind(sys.argv[1])
srv.listen(16)
def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = srv.accept()
    u = socket.socket(socket.AF_UNIX)
    u.connect(sys.argv[2])
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
PY
proxy_pid=$!
# shellcheck disable=SC2317  # called through it_on_exit
stop_proxy() { kill "$proxy_pid" 2>/dev/null; true; }
it_on_exit stop_proxy
for _ in $(seq 50); do [[ -S $work/proxy.sock ]] && break; sleep 0.1; done
DOCKER_HOST=unix://$work/proxy.sock it_guard_start
it_guard_wait_for "cannot watch docker's containers as they start (no dockerd process serves $work/proxy.sock)" \
  "through a proxy: says why it cannot watch"
assert_contains "$(cat "$work/guard.err")" "polling \`docker ps\` every 2 s" "through a proxy: says it polls instead"
docker run -d --name polled --shm-size 64m --label gpu-run.shm-size=64m "$IMAGE" sleep 300 >/dev/null ||
  it_die "docker run polled"
it_guard_wait_for "guarding container polled (" "through a proxy: a new container is found by polling"
it_guard_stop "through a proxy"
docker rm -f polled >/dev/null
stop_proxy

# IPv6 loopback, when the host has it.
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
  port=$(free_port)
  it_guard_start --metrics "[::1]:$port"
  it_guard_wait_for "guarding container scraped" "[::1]: picked up"
  metrics=$(curl -sS -g --max-time 10 "http://[::1]:$port/metrics")
  assert_contains "$metrics" "gpu_run_shm_size_bytes{$labels} $((size_kb * 1024))" "[::1]: scraped over IPv6"
  it_guard_stop "[::1]"
else
  it_log "no IPv6 loopback on this host: [::1] not tried"
fi
docker rm -f scraped >/dev/null

# ------------------------------------------------------------ podman
p=$(it_tmpdir)
it_on_exit it_podman_cleanup "$p"
it_podman_env "$p"
it_podman_image "$IMAGE"
: >"$hostlog"
port=$(free_port)
it_guard_start --engine podman --metrics "127.0.0.1:$port"
it_guard_wait_for "watching podman's containers as they start ($p/run/overlay-containers)" "podman: its run root watched"
podman run -d --name pfill --shm-size 64m --label gpu-run.shm-size=64m "$IMAGE" sh -c "$FILL" >/dev/null ||
  it_die "podman run pfill failed"
podman run -d --name pbrief --shm-size 64m --label gpu-run.shm-size=64m "$IMAGE" sleep 1 >/dev/null ||
  it_die "podman run pbrief failed"
it_guard_wait_for "guarding container pbrief (" "podman: a 1 s container guarded"
it_guard_wait_for "stopped guarding container pbrief (" "podman: and no longer once it exited"
podman rm -f pbrief >/dev/null 2>&1
it_guard_wait_for "guarding container pfill" "podman: picked up"
assert_eq 0 "$(podman wait pfill)" "podman: wrote 96 MiB into a 64 MiB /dev/shm (exit 0)"
pkb=$(podman logs pfill 2>/dev/null | awk '$NF == "/dev/shm" { print $2 }')
[[ ${pkb:-0} -gt 98304 ]] && it_pass "podman: df inside shows /dev/shm grown to $pkb KiB" ||
  it_fail "podman: df shows [$pkb] KiB"
[[ $(growths_of pfill) -ge 1 ]] && it_pass "podman: $(growths_of pfill) growth line(s)" || it_fail "podman: no growth"
it_guard_stop "podman"
podman rm -f pfill >/dev/null 2>&1

it_done
