#!/usr/bin/env bash
# gpu-run-ctl guard, the node service, against containers of a private dockerd: a labelled
# busybox container that writes 96 MiB into a 64 MiB /dev/shm finishes because the guard grows
# it (one host log line and one stderr line per growth); an unlabelled one is left alone
# (and fails) without --all and is guarded with --all; a container planned from its GPU_RUN_*
# environment keeps one batch per worker free; a guarded container removed mid-sample does not
# stop the guard; SIGTERM ends it with exit 0.
# Usage: ctl_guard_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is looked up next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker

bin_dir=${GPU_RUN_BIN_DIR:-}
[[ -z $bin_dir && -n ${1:-} ]] && bin_dir=$(dirname "$1")
[[ -z $bin_dir ]] && bin_dir=$here/../../build/release/bin
CTL=$bin_dir/gpu-run-ctl
[[ -x $CTL ]] || it_skip "gpu-run-ctl not found in $bin_dir (build it, or set GPU_RUN_BIN_DIR)"
CTL=$(cd "$(dirname "$CTL")" && pwd)/gpu-run-ctl
it_log "testing $CTL"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
mkdir -p "$work/xdg"
hostlog=$work/gpu-run.log
printf '{"log_file": "%s", "guard": {"min_free_fraction": 0.25, "step_fraction": 0.5}}\n' "$hostlog" \
  >"$work/config.json"
export XDG_CONFIG_HOME=$work/xdg GPU_RUN_CONFIG=$work/config.json
unset GPU_RUN_PROFILE_PATH GPU_RUN_PROFILE GPU_RUN_GPUS GPU_RUN_WORKERS GPU_RUN_BATCH_SIZE GPU_RUN_SHM_SIZE \
  GPU_RUN_NUM_WORKERS || true

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

# 12 x 8 MiB into /dev/shm, one file every 0.3 s (after 3 s: the guard polls every 2 s), then
# the file count and df. 96 MiB do not fit in 64 MiB: head fails with ENOSPC without the guard.
FILL='sleep 3; i=0; while [ $i -lt 12 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.3; done; sleep 2; ls /dev/shm | wc -l; df -k /dev/shm'

guard_pid=
# shellcheck disable=SC2317  # called through it_on_exit
stop_guard_at_exit() { [[ -n $guard_pid ]] && kill -KILL "$guard_pid" 2>/dev/null; true; }
it_on_exit stop_guard_at_exit
# Starts gpu-run-ctl guard ARGS... in the background, its stderr in $work/guard.err.
start_guard() {
  rm -f "$work/guard.err"
  "$CTL" guard "$@" >"$work/guard.out" 2>"$work/guard.err" &
  guard_pid=$!
  wait_for "gpu-run-ctl: guard: guarding " "guard started"
}
# Waits (up to 15 s) until the guard's stderr holds TEXT.
wait_for() {
  local i
  for ((i = 0; i < 150; i++)); do
    grep -qF -- "$1" "$work/guard.err" 2>/dev/null && return 0
    sleep 0.1
  done
  it_fail "$2: no '$1' in the guard's stderr:"$'\n'"$(cat "$work/guard.err")"
  return 1
}
# Sends SIGTERM and checks the guard exits 0.
stop_guard() {
  kill -TERM "$guard_pid"
  local rc=0
  wait "$guard_pid" || rc=$?
  guard_pid=
  assert_eq 0 "$rc" "$1: SIGTERM ends the guard with exit 0"
  assert_contains "$(cat "$work/guard.err")" "gpu-run-ctl: guard: stopped" "$1: says it stopped"
  it_log "$1: the guard's stderr:"$'\n'"$(cat "$work/guard.err")"
}
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
start_guard
run_fill --name labelled --label gpu-run.shm-size=64m
run_fill --name plain
wait_for "guarding container labelled" "labelled: picked up"
assert_eq 0 "$(docker wait labelled)" "labelled: wrote 96 MiB into a 64 MiB /dev/shm (exit 0)"
assert_eq 12 "$(files labelled)" "labelled: all 12 files are there"
kb=$(df_kb labelled)
[[ ${kb:-0} -gt 98304 ]] && it_pass "labelled: df inside shows /dev/shm grown to $kb KiB" ||
  it_fail "labelled: df shows [$kb] KiB"
assert_eq 1 "$(docker wait plain)" "plain: not guarded without --all, ran out of /dev/shm (exit 1)"
assert_not_contains "$(cat "$work/guard.err")" "container plain" "plain: the guard never looked at it"
wait_for "stopped guarding container labelled" "labelled: guarding stops when it exits"
grew=$(grep -c 'action=resized by=guard' "$hostlog" || true)
[[ $grew -ge 1 ]] && it_pass "labelled: $grew growth line(s) in the host log" || it_fail "no growth in $hostlog"
assert_eq "$grew" "$(growths_of labelled)" "labelled: one stderr line per logged growth"
assert_contains "$(head -n 1 "$hostlog")" "before=64m" "labelled: the first growth is from 64m"
assert_contains "$(cat "$hostlog")" "container=$(docker inspect -f '{{.Id}}' labelled) action=resized" \
  "labelled: the host log names the container"
it_log "host log:"$'\n'"$(cat "$hostlog")"
stop_guard "labelled only"

# ------------------------------------------------------------ --all
: >"$hostlog"
start_guard --all --interval 5
assert_contains "$(cat "$work/guard.err")" "every running container" "--all: says what it guards"
run_fill --name plain2
# Planned from its environment: imagenet, 2 workers x 96 images (55 MiB a batch).
docker run -d --name planned --shm-size 64m --label gpu-run.profile=imagenet -e GPU_RUN_PROFILE=imagenet \
  -e GPU_RUN_NUM_WORKERS=2 -e GPU_RUN_BATCH_SIZE=96 "$IMAGE" sleep 300 >/dev/null || it_die "docker run planned"
docker run -d --name victim --shm-size 64m "$IMAGE" sleep 300 >/dev/null || it_die "docker run victim"
wait_for "guarding container planned" "planned: picked up"
assert_contains "$(cat "$work/guard.err")" "keeps 110.3MiB free (profile imagenet, 2 workers x a batch of 96)" \
  "planned: the plan's headroom, one batch per worker"
wait_for "gpu-run-ctl: guard: container planned: /dev/shm 64MiB -> " "planned: grown at once (64 MiB < 110 MiB free)"
wait_for "guarding container victim" "victim: picked up"
docker rm -f victim >/dev/null
assert_eq 0 "$(docker wait plain2)" "--all: the unlabelled container wrote its 96 MiB (exit 0)"
assert_eq 12 "$(files plain2)" "--all: all 12 files are there"
kb=$(df_kb plain2)
[[ ${kb:-0} -gt 98304 ]] && it_pass "--all: df inside shows /dev/shm grown to $kb KiB" ||
  it_fail "--all: df shows [$kb] KiB"
[[ $(growths_of plain2) -ge 1 ]] && it_pass "--all: $(growths_of plain2) growth line(s) for plain2" ||
  it_fail "--all: no growth for plain2"
wait_for "stopped guarding container victim" "victim: removed mid-sample, guarding stops"
kill -0 "$guard_pid" 2>/dev/null && it_pass "the guard survives a container removed under it" ||
  it_fail "the guard died"
assert_not_contains "$(cat "$work/guard.err")" "terminate" "no crash in the guard's stderr"
stop_guard "--all"
docker rm -f planned >/dev/null

it_done
