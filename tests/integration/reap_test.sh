#!/usr/bin/env bash
# gpu-run-ctl reap against a running container of a private dockerd: of the segments in its
# /dev/shm, one held open by the container's own process and one mapped by a live process on the
# host are kept, a dead owner's (written by an exec that exited) is listed and, with --delete,
# removed; a file of no engine is never touched. Wrong requests: exit 2, one line, nothing removed.
# Usage: reap_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is looked up next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker python3

it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl
it_log "testing $CTL"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_isolate_config "$work" "{\"log_file\": \"$work/gpu-run.log\"}"

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

# shellcheck disable=SC2317  # called through assert_exit
reap() { "$CTL" reap "$@"; }
one_line() { assert_eq 1 "$(printf '%s' "$IT_ERR" | grep -c '')" "$1: one line on stderr [$IT_ERR]"; }
inside() { docker exec job ls /dev/shm | LC_ALL=C sort | tr '\n' ' '; }

# The container's main process holds torch_1_1 open on fd 3 for its whole life.
docker run -d --name job --shm-size 64m "$IMAGE" \
  sh -c 'exec 3>/dev/shm/torch_1_1; echo held >&3; sleep 600' >/dev/null 2>&1 || it_die "docker run failed"
pid=$(docker inspect -f '{{.State.Pid}}' job)
# Segments written by execs that exited: a dead owner's, and a file of no engine.
docker exec job sh -c 'dd if=/dev/zero of=/dev/shm/nccl-DeAd01 bs=4096 count=16 2>/dev/null'
docker exec job sh -c 'echo notes > /dev/shm/notes.txt'
docker exec job sh -c 'dd if=/dev/zero of=/dev/shm/psm_5a5a5a bs=4096 count=2 2>/dev/null'
# A live process on the host maps psm_5a5a5a (through the container's root) and closes its fd.
ready=$work/mapped
python3 - "/proc/$pid/root/dev/shm/psm_5a5a5a" "$ready" <<'PY' &
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 8192)
os.close(fd)
open(sys.argv[2], "w").close()
time.sleep(600)
PY
mapper=$!
it_on_exit kill "$mapper"
for _ in $(seq 50); do [[ -e $ready ]] && break; sleep 0.1; done
[[ -e $ready ]] || it_die "the mapping process did not start"

# --- wrong requests --------------------------------------------------------------------------
assert_exit 2 reap
assert_contains "$IT_ERR" "give CONTAINER" "no target: says what to give"
one_line "no target"
assert_exit 2 reap job --host
assert_contains "$IT_ERR" "not both" "CONTAINER and --host"
assert_exit 2 reap no-such-container
assert_contains "$IT_ERR" "no-such-container" "unknown container: named"
one_line "unknown container"
assert_exit 2 reap --host --engine docker
assert_contains "$IT_ERR" "--engine goes with CONTAINER" "--engine with --host"
assert_exit 2 reap job --min-age=-1
assert_contains "$IT_ERR" "negative" "--min-age -1"
assert_eq "nccl-DeAd01 notes.txt psm_5a5a5a torch_1_1 " "$(inside)" "wrong requests removed nothing"

# --- the listing -----------------------------------------------------------------------------
assert_exit 0 reap job --min-age 0
assert_contains "$IT_OUT" "nccl-DeAd01  64KiB  nccl  orphan" "the dead owner's segment is an orphan, with its size"
assert_contains "$IT_OUT" "torch_1_1  4KiB  torch  in use" "the segment held open is in use"
assert_contains "$IT_OUT" "psm_5a5a5a  8KiB  python-shm  in use" "the segment mapped from the host is in use"
assert_contains "$IT_OUT" "other files, left alone: 1" "notes.txt is no engine's"
assert_eq "nccl-DeAd01 notes.txt psm_5a5a5a torch_1_1 " "$(inside)" "listing removed nothing"
assert_exit 0 reap job
assert_contains "$IT_OUT" "nccl-DeAd01  64KiB  nccl  recent: kept" "a segment changed within --min-age is kept"

# --- --delete: only the dead owner's goes ------------------------------------------------------
assert_exit 0 reap --delete job --min-age 0
assert_contains "$IT_OUT" "nccl-DeAd01  64KiB  nccl  removed" "the orphan is removed"
assert_contains "$IT_OUT" "removed 1 (64KiB)" "the total"
assert_eq "notes.txt psm_5a5a5a torch_1_1 " "$(inside)" "only the orphan is gone, as the container sees it"
assert_eq "held" "$(docker exec job cat /dev/shm/torch_1_1)" "the held segment is intact"
assert_exit 0 reap --delete job --min-age 0
assert_contains "$IT_OUT" "orphans: 0 segments" "nothing left to reap"

it_done
