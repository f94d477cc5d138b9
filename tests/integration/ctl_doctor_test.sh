#!/usr/bin/env bash
# gpu-run-ctl doctor against containers of a private dockerd: from the host (inspect +
# /proc/PID/root) and from inside a container (the binary and the host's libraries bound in).
# Usage: ctl_doctor_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is looked up next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker jq

it_binaries "${1:-}" gpu-run-ctl gpu-run
CTL=$IT_BIN/gpu-run-ctl
GPU_RUN=$IT_BIN/gpu-run
it_log "testing $CTL"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
# No host config (built-in defaults: memory_fraction_max 0.5), no user profiles.
it_isolate_config "$work"

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

# shellcheck disable=SC2317  # called through assert_exit
doc() { "$CTL" doctor "$@"; }

# level JSON CHECK: the level of finding CHECK in doctor's --json output.
level() { jq -r --arg c "$2" '[.findings[] | select(.check == $c) | .level] | join(",")' <<<"$1"; }
message() { jq -r --arg c "$2" '[.findings[] | select(.check == $c) | .message] | join(" | ")' <<<"$1"; }

# one_line DESC: the last assert_exit left exactly one line on stderr.
one_line() { assert_eq 1 "$(printf '%s' "$IT_ERR" | grep -c '')" "$1: one line on stderr [$IT_ERR]"; }

start() { docker run -d "$@" >/dev/null || it_die "docker run $* failed"; }

# --- wrong requests: exit 2, one line ------------------------------------------------------
assert_exit 2 doc --engine rkt plain
one_line "--engine rkt"
assert_contains "$IT_ERR" "--engine" "--engine rkt names the option"
assert_exit 2 doc no-such-container
one_line "unknown container"
assert_contains "$IT_ERR" "no-such-container" "unknown container is named"
assert_exit 2 doc --engine docker
one_line "--engine without CONTAINER"
assert_exit 2 doc a b
one_line "two containers"
docker create --name stopped "$IMAGE" sleep 300 >/dev/null || it_die "docker create failed"
assert_exit 2 doc stopped
one_line "stopped container"
assert_contains "$IT_ERR" "is not running" "stopped container: says so"

# --- a plain docker run: the 64 MiB default fails --------------------------------------------
start --name plain "$IMAGE" sleep 300
assert_exit 4 doc plain
assert_contains "$IT_OUT" "gpu-run-ctl doctor: container plain (" "plain: header names the container"
assert_contains "$IT_OUT" "FAIL  shm-size" "plain: shm-size FAILs"
assert_contains "$IT_OUT" "64MiB, Docker's default" "plain: names the 64 MiB default"
assert_contains "$IT_OUT" "fix: restart the container sized for the job: gpu-run --profile" "plain: fix is gpu-run"
assert_contains "$IT_OUT" "kernel.shmmax or kernel.shmall does not help" "plain: corrects the shmmax advice"
assert_not_contains "$IT_OUT" "raise kernel.shmmax" "plain: does not recommend shmmax"
assert_contains "$IT_OUT" "worst: FAIL" "plain: worst FAIL"
one_line "plain: summary"
assert_contains "$IT_ERR" "worst finding FAIL (exit 4)" "plain: stderr summary"
assert_exit 4 doc --json plain
json=$IT_OUT
if jq -e . >/dev/null <<<"$json"; then it_pass "plain: --json parses"; else it_fail "plain: --json does not parse: [$json]"; fi
assert_eq FAIL "$(level "$json" shm-size)" "plain --json: shm-size FAIL"
assert_eq 67108864 "$(jq -r .facts.shm_size_bytes <<<"$json")" "plain --json: 64 MiB measured"
assert_eq "FAIL 4" "$(jq -r '"\(.worst) \(.exit_code)"' <<<"$json")" "plain --json: worst and exit code"
assert_eq private "$(jq -r .facts.ipc_mode <<<"$json")" "plain --json: ipc mode private"
assert_eq false "$(jq -r .facts.shm_is_host <<<"$json")" "plain --json: not the host's /dev/shm"
plain_id=$(docker inspect -f '{{.Id}}' plain)
assert_exit 4 doc --engine docker "${plain_id:0:12}"
assert_contains "$IT_OUT" "container plain (${plain_id:0:12}, docker)" "a container by short id"

# --- sized by gpu-run: OK ---------------------------------------------------------------------
"$GPU_RUN" --engine docker --gpu-request none --profile cifar -d --name sized "$IMAGE" sleep 300 >/dev/null \
  2>"$work/gpu-run.err" || it_die "gpu-run --profile cifar failed: $(cat "$work/gpu-run.err")"
assert_exit 0 doc sized
assert_contains "$IT_OUT" "OK    shm-size" "sized: shm-size OK"
assert_contains "$IT_OUT" "worst: OK" "sized: worst OK"
assert_eq "" "$IT_ERR" "sized: nothing on stderr"
assert_exit 0 doc --json sized
json=$IT_OUT
assert_eq OK "$(level "$json" shm-size)" "sized --json: shm-size OK"
assert_eq OK "$(level "$json" sizing)" "sized --json: GPU_RUN_SHM_SIZE applied"
assert_eq cifar "$(jq -r '.facts.env.GPU_RUN_PROFILE' <<<"$json")" "sized --json: env from inspect"
want=$(docker inspect -f '{{.HostConfig.ShmSize}}' sized)
assert_eq "$want" "$(jq -r .facts.shm_size_bytes <<<"$json")" "sized --json: the size gpu-run passed"

# --- --ipc host: WARN -------------------------------------------------------------------------
start --name hostipc --ipc host "$IMAGE" sleep 300
assert_exit 3 doc --json hostipc
json=$IT_OUT
assert_eq WARN "$(level "$json" ipc)" "ipc host: WARN"
assert_contains "$(message "$json" ipc)" "sizing does not apply" "ipc host: says the sizing does not apply"
assert_eq true "$(jq -r .facts.shm_is_host <<<"$json")" "ipc host: same device as the host's /dev/shm"

# --- no argument on the host itself: where it looked and what to run instead, exit 0 ------------
host_json=$(doc --json)
host_rc=$?
if [[ $(jq -r .target <<<"$host_json") == "this machine"* ]]; then
  assert_eq 0 "$host_rc" "on the host: exit 0, no --ipc=host warning"
  assert_eq OK "$(level "$host_json" where)" "on the host: one finding, where"
  assert_contains "$(jq -r '.findings[0].fix' <<<"$host_json")" "gpu-run-ctl doctor CONTAINER" \
    "on the host: says what to run instead"
else
  it_log "not run in the host's namespaces: the on-host check does not apply"
fi

# --- --ipc none: no /dev/shm -------------------------------------------------------------------
start --name noipc --ipc none "$IMAGE" sleep 300
assert_exit 4 doc --json noipc
assert_eq FAIL "$(level "$IT_OUT" shm-mount)" "ipc none: shm-mount FAIL"

# --- a leftover torch_* segment: WARN; NCCL segments listed -----------------------------------
start --name leak --shm-size 256m "$IMAGE" sleep 300
docker exec leak sh -c 'head -c 1048576 /dev/zero >/dev/shm/torch_123_456_0 &&
  head -c 2097152 /dev/zero >/dev/shm/nccl-AbC123' || it_die "docker exec leak failed"
assert_exit 3 doc --json leak
json=$IT_OUT
assert_eq WARN "$(level "$json" torch-leftovers)" "torch leftover: WARN"
assert_contains "$(message "$json" torch-leftovers)" "1 torch_* segment holding 1MiB" "torch leftover: total"
assert_contains "$(message "$json" torch-leftovers)" "torch_123_456_0" "torch leftover: named"
assert_eq OK "$(level "$json" nccl)" "nccl segment: OK"
assert_contains "$(message "$json" nccl)" "nccl-AbC123 (2MiB)" "nccl segment: listed with its size"
assert_eq OK "$(level "$json" shm-size)" "256m: shm-size OK"
assert_eq "$((3 * 1048576))" "$(jq -r .facts.shm_used_bytes <<<"$json")" "3 MiB used"

# --- memory limit against shm, workers against CPUs, an ignored GPU_RUN_SHM_SIZE ---------------
start --name tight --memory 256m --shm-size 200m "$IMAGE" sleep 300
assert_exit 3 doc --json tight
assert_eq WARN "$(level "$IT_OUT" memory)" "shm 200m of memory 256m: WARN"
assert_contains "$(message "$IT_OUT" memory)" "memory_fraction_max 50%" "memory: names the fraction"

start --name busy --cpus 1 -e GPU_RUN_NUM_WORKERS=4 --shm-size 256m "$IMAGE" sleep 300
assert_exit 3 doc --json busy
assert_eq WARN "$(level "$IT_OUT" workers)" "4 workers on --cpus 1: WARN"
assert_eq 1 "$(jq -r .facts.cpus <<<"$IT_OUT")" "--cpus 1: one CPU"

start --name ignored -e GPU_RUN_SHM_SIZE=1g "$IMAGE" sleep 300
assert_exit 4 doc --json ignored
assert_eq FAIL "$(level "$IT_OUT" sizing)" "GPU_RUN_SHM_SIZE=1g on a 64 MiB /dev/shm: FAIL"

start --name sysctl --sysctl kernel.shmmax=68719476736 --shm-size 256m "$IMAGE" sleep 300
assert_exit 0 doc --json sysctl
assert_contains "$(message "$IT_OUT" shmmax)" "kernel.shmmax=68719476736" "--sysctl kernel.shmmax: explained"

# --- inside a container: the binary and the host's shared libraries bound in -------------------
# gpu-run-ctl links glibc, libcap and libseccomp dynamically; busybox has none of them. Bind the
# host's library directories (docker resolves a symlinked source such as merged-/usr /lib).
libs=()
for dir in /lib /lib64 /usr/lib /usr/lib64; do
  [[ -d $dir ]] && libs+=(-v "$dir:$dir:ro")
done
inside_image=$IMAGE
inside=(-v "$CTL:/gpu-run-ctl:ro" "${libs[@]}")

assert_exit 4 docker run --rm "${inside[@]}" "$inside_image" /gpu-run-ctl doctor
assert_contains "$IT_OUT" "gpu-run-ctl doctor: this container" "inside: header"
assert_contains "$IT_OUT" "64MiB, Docker's default" "inside: names the 64 MiB default"
assert_contains "$IT_OUT" "OK    ipc" "inside: own IPC namespace"

assert_exit 0 "$GPU_RUN" --engine docker --gpu-request none --profile cifar --rm "${inside[@]}" "$inside_image" \
  /gpu-run-ctl doctor --json
json=$IT_OUT
assert_eq OK "$(jq -r .worst <<<"$json")" "inside, sized by gpu-run: OK"
assert_eq OK "$(level "$json" sizing)" "inside: GPU_RUN_SHM_SIZE from the environment applied"
assert_eq false "$(jq -r .facts.from_host <<<"$json")" "inside: from_host false"

assert_exit 3 docker run --rm --memory 256m --shm-size 200m "${inside[@]}" "$inside_image" /gpu-run-ctl doctor --json
assert_eq WARN "$(level "$IT_OUT" memory)" "inside: the cgroup memory limit is read"

assert_exit 3 docker run --rm --cpus 1 -e GPU_RUN_NUM_WORKERS=4 --shm-size 256m "${inside[@]}" "$inside_image" \
  /gpu-run-ctl doctor --json
assert_eq WARN "$(level "$IT_OUT" workers)" "inside: the cgroup CPU quota is read"
assert_eq 1 "$(jq -r .facts.cpus <<<"$IT_OUT")" "inside --cpus 1: one CPU"

assert_exit 3 docker run --rm --ipc host "${inside[@]}" "$inside_image" /gpu-run-ctl doctor --json
assert_eq WARN "$(level "$IT_OUT" ipc)" "inside --ipc host: WARN"

# --- podman: its own default, gpu-run's size, and --ipc host -----------------------------------
# --- doctor names the cause (issue 40) --------------------------------------------------------
# A SIGKILL from outside (docker kill): exit 137 with OOMKilled false is not an OOM kill.
start --name killed "$IMAGE" sleep 300
docker kill killed >/dev/null
assert_eq "137 false" "$(docker inspect -f '{{.State.ExitCode}} {{.State.OOMKilled}}' killed)" "docker kill: exit 137, not OOM-killed"
out=$(doc --json killed 2>/dev/null)
assert_eq "" "$(level "$out" oom-killed)" "docker kill: no oom-killed finding"
assert_eq WARN "$(level "$out" killed)" "docker kill: a SIGKILL from outside"
# A crash of a job whose command line started more workers than gpu-run planned: that first.
"$GPU_RUN" --engine docker --gpu-request none --profile cifar --workers 1 -d --name mismatch "$IMAGE" sh -c \
  'echo python train.py -j 8; echo "RuntimeError: DataLoader worker (pid 42) is killed by signal: Bus error."; exit 1' \
  >/dev/null 2>"$work/mismatch.err" || it_die "gpu-run mismatch failed: $(cat "$work/mismatch.err")"
assert_contains "$(cat "$work/mismatch.err")" "the command line's '-j 8' asks for 8 DataLoader workers" "gpu-run warned at the start"
docker wait mismatch >/dev/null
out=$(doc --json mismatch 2>/dev/null)
assert_eq workers-mismatch "$(jq -r '.findings[0].check' <<<"$out")" "the workers' mismatch is the first finding"
assert_contains "$(jq -r '.findings[0].fix' <<<"$out")" "gpu-run --workers 8" "its fix plans for the command line's workers"

if command -v podman >/dev/null 2>&1 && command -v conmon >/dev/null 2>&1; then
  p=$(it_tmpdir)
  it_on_exit it_podman_cleanup "$p"
  it_podman_env "$p"
  it_podman_image "$IMAGE"
  podman run -d --name pplain "$IMAGE" sleep 300 >/dev/null || it_die "podman run failed"
  assert_exit 4 doc --engine podman --json pplain
  assert_eq FAIL "$(level "$IT_OUT" shm-size)" "podman default: FAIL"
  assert_contains "$(message "$IT_OUT" shm-size)" "podman's default" "podman default: named"
  "$GPU_RUN" --engine podman --gpu-request none --profile cifar -d --name psized "$IMAGE" sleep 300 >/dev/null \
    2>"$work/gpu-run.err" || it_die "gpu-run --engine podman failed: $(cat "$work/gpu-run.err")"
  assert_exit 0 doc --engine podman psized
  assert_contains "$IT_OUT" "worst: OK" "podman sized by gpu-run: OK"
  podman run -d --name phost --ipc host "$IMAGE" sleep 300 >/dev/null || it_die "podman run --ipc host failed"
  assert_exit 3 doc --engine podman --json phost
  assert_eq WARN "$(level "$IT_OUT" ipc)" "podman --ipc host: WARN (found from the IPC namespace)"
  assert_eq host "$(jq -r .facts.ipc_mode <<<"$IT_OUT")" "podman --ipc host: ipc mode host"
else
  it_log "podman or conmon not on PATH: the podman checks did not run"
fi

it_done
