#!/usr/bin/env bash
# gpu-run-ctl resize against running containers of a private dockerd and an isolated podman:
# every way the engines provide /dev/shm is resized in place (files kept, the new size seen
# inside at once) or refused with exit 2 and nothing changed; one host log line per resize.
# Usage: resize_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is looked up next to it, or in
# $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker podman conmon jq

it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl
it_log "testing $CTL"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
log=$work/gpu-run.log
it_isolate_config "$work" "{\"log_file\": \"$log\", \"memory_fraction_max\": 0.5}"

host_shm_line() { awk '$5 == "/dev/shm"' /proc/self/mountinfo; }
host_shm_kb() { df -k /dev/shm | awk 'NR == 2 { print $2 }'; }
host_line_before=$(host_shm_line)
host_kb_before=$(host_shm_kb)

# shellcheck disable=SC2317  # called through assert_exit
resize() { "$CTL" resize "$@"; }
one_line() { assert_eq 1 "$(printf '%s' "$IT_ERR" | grep -c '')" "$1: one line on stderr [$IT_ERR]"; }
# The /dev/shm lines of a process's mount table (mount id, device, options).
shm_mounts() { awk '$5 == "/dev/shm"' "/proc/$1/mountinfo"; }
# ENGINE CONTAINER: the size of /dev/shm in KiB as df inside the container says.
inside_kb() { "$1" exec "$2" df -k /dev/shm | awk 'NR == 2 { print $2 }'; }
resized_lines() { grep -c ' action=resized ' "$log" 2>/dev/null || true; }

# ============================== docker ==============================================
d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"
start() { docker run -d "$@" >/dev/null 2>&1 || it_die "docker run $* failed"; }
dpid() { docker inspect -f '{{.State.Pid}}' "$1"; }

# --- wrong requests: exit 2, one line ------------------------------------------------------
start --name keep "$IMAGE" sh -c 'exec 3>/dev/shm/keep; echo hi >&3; sleep 300'
assert_exit 2 resize --engine rkt keep 1g
one_line "--engine rkt"
assert_exit 2 resize no-such-container 1g
assert_contains "$IT_ERR" "no-such-container" "unknown container: named"
one_line "unknown container"
docker create --name stopped "$IMAGE" sleep 300 >/dev/null 2>&1 || it_die "docker create failed"
assert_exit 2 resize stopped 1g
assert_contains "$IT_ERR" "is not running" "stopped container: says so"
assert_exit 2 resize keep
assert_contains "$IT_ERR" "missing SIZE" "no SIZE and no sizing flags"
assert_exit 2 resize keep 1g --profile cifar
assert_contains "$IT_ERR" "not both" "SIZE and --profile"
assert_exit 2 resize keep 12q
one_line "bad SIZE"

# --- private: resized in place while a process keeps a file open in it -----------------------
pid=$(dpid keep)
mount_id_before=$(shm_mounts "$pid" | awk '{ print $1 }')
assert_eq 65536 "$(inside_kb docker keep)" "private: 64 MiB before"
assert_exit 0 resize keep 1g
assert_contains "$IT_OUT" "container keep (" "private: names the container"
assert_contains "$IT_OUT" "/dev/shm 64MiB -> 1GiB" "private: before and after"
assert_contains "$IT_OUT" "\`docker inspect\` keeps showing the old ShmSize" "private: says inspect keeps the old size"
assert_not_contains "$IT_OUT" "shared" "private: not shared"
assert_eq 1048576 "$(inside_kb docker keep)" "private: df inside shows 1 GiB at once"
assert_eq hi "$(docker exec keep cat /dev/shm/keep)" "private: the open file survived"
assert_eq "$pid" "$(dpid keep)" "private: the same process runs (no restart)"
assert_eq "$mount_id_before" "$(shm_mounts "$pid" | awk '{ print $1 }')" "private: the same mount, remounted"
assert_eq 67108864 "$(docker inspect -f '{{.HostConfig.ShmSize}}' keep)" "private: inspect still has the old ShmSize"
assert_exit 0 "$CTL" doctor --json keep
assert_eq 1073741824 "$(jq -r .facts.shm_size_bytes <<<"$IT_OUT")" "private: doctor reads the live size (and is content now)"
assert_contains "$(tail -n 1 "$log")" "action=resized" "private: logged"
assert_contains "$(tail -n 1 "$log")" "before=64m after=1024m" "private: the log line has before and after"
assert_contains "$(tail -n 1 "$log")" "container=$(docker inspect -f '{{.Id}}' keep)" "private: the log names the container"

# --- shrinking: down to what it holds, never below --------------------------------------------
assert_exit 0 resize keep 128m
assert_eq 131072 "$(inside_kb docker keep)" "shrink to 128m"
docker exec keep dd if=/dev/zero of=/dev/shm/big bs=1048576 count=10 2>/dev/null || it_die "dd failed"
assert_exit 2 resize keep 8m
one_line "below used"
assert_contains "$IT_ERR" "size 8MiB is below what /dev/shm in container keep holds now" "below used: refused"
assert_contains "$IT_ERR" "used of 128MiB" "below used: with the numbers"
assert_eq 131072 "$(inside_kb docker keep)" "below used: unchanged"
assert_exit 0 resize keep 11m
assert_eq 11264 "$(inside_kb docker keep)" "shrink to just above used"
assert_eq hi "$(docker exec keep cat /dev/shm/keep)" "the open file survived the shrinks"

# --- a plan instead of a size -------------------------------------------------------------------
start --name planned "$IMAGE" sleep 300
want=$("$CTL" plan --profile cifar --json | jq -r .shm_bytes)
assert_exit 0 resize planned --profile cifar
assert_eq $((want / 1024)) "$(inside_kb docker planned)" "--profile cifar: the plan's size ($want bytes)"
assert_exit 0 resize planned 200000001b
pages=$(((200000001 + 4095) / 4096))
assert_eq $((pages * 4)) "$(inside_kb docker planned)" "a size in bytes: tmpfs rounds it up to pages"

# --- shareable, and a container that joined it ------------------------------------------------
start --name base --ipc shareable "$IMAGE" sleep 300
start --name joiner --ipc "container:base" "$IMAGE" sleep 300
base_id=$(docker inspect -f '{{.Id}}' base)
assert_exit 0 resize base 256m
assert_contains "$IT_OUT" "every container that joined the IPC namespace of base" "shareable: says it is shared"
assert_eq 262144 "$(inside_kb docker base)" "shareable: base sees 256 MiB"
assert_eq 262144 "$(inside_kb docker joiner)" "shareable: the joiner sees 256 MiB"
assert_eq 262144 "$(df -k "$d/root/containers/$base_id/mounts/shm" | awk 'NR == 2 { print $2 }')" \
  "shareable: the engine's tmpfs on the host is the one resized"
assert_exit 0 resize joiner 512m
assert_contains "$IT_OUT" "it uses the IPC namespace of container base (${base_id:0:12}" "container:X resolves to X"
assert_eq 524288 "$(inside_kb docker base)" "container:X: base sees 512 MiB"
assert_eq 524288 "$(inside_kb docker joiner)" "container:X: the joiner sees 512 MiB"
assert_contains "$(tail -n 1 "$log")" "container=$base_id via=" "container:X: the log names both"

# --- refused: none, host, the host's /dev/shm bound in -----------------------------------------
check_refused() {
  local name=$1 want=$2 before lines
  before=$(shm_mounts "$(dpid "$name")")
  lines=$(resized_lines)
  assert_exit 2 resize "$name" 256m
  one_line "$name"
  assert_contains "$IT_ERR" "$want" "$name: refused, says why"
  assert_eq "$before" "$(shm_mounts "$(dpid "$name")")" "$name: its /dev/shm mounts unchanged"
  assert_eq "$lines" "$(resized_lines)" "$name: nothing logged as resized"
}
start --name noipc --ipc none "$IMAGE" sleep 300
check_refused noipc "has --ipc=none: it has no /dev/shm"
start --name hostipc --ipc host "$IMAGE" sleep 300
check_refused hostipc "the host's /dev/shm is never resized"
start --name hostshm -v /dev/shm:/dev/shm "$IMAGE" sleep 300
check_refused hostshm "(-v /dev/shm:/dev/shm): the host's /dev/shm is never resized"

# --- the memory budget, and --force -------------------------------------------------------------
start --name tight --memory 256m "$IMAGE" sleep 300
assert_exit 2 resize tight 200m
one_line "over budget"
assert_contains "$IT_ERR" "does not fit the memory limit 256MiB" "over budget: the limit"
assert_contains "$IT_ERR" "at most 50% = 128MiB may be shm" "over budget: the budget"
assert_contains "$IT_ERR" "--force" "over budget: names --force"
assert_eq 65536 "$(inside_kb docker tight)" "over budget: unchanged"
assert_exit 0 resize tight 200m --force
assert_contains "$IT_OUT" "over the memory budget (--force)" "--force: says so"
assert_eq 204800 "$(inside_kb docker tight)" "--force: resized"
assert_contains "$(tail -n 1 "$log")" "forced=1" "--force: logged"
assert_exit 0 resize tight 100m
assert_eq 102400 "$(inside_kb docker tight)" "within the budget: no --force needed"

# --- a container that turned its /dev/shm into a symlink to / -----------------------------------
# (CAP_SYS_ADMIN to unmount its own; --privileged needs capabilities a nested test host may lack)
start --name hostile --cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined "$IMAGE" sh -c 'umount /dev/shm && rmdir /dev/shm && ln -s / /dev/shm && sleep 300'
for _ in $(seq 50); do docker exec hostile test -L /dev/shm && break; sleep 0.1; done
docker exec hostile test -L /dev/shm || it_die "the hostile container did not make /dev/shm a symlink"
hostile_root_before=$(awk '$5 == "/"' "/proc/$(dpid hostile)/mountinfo")
assert_exit 2 resize hostile 256m
one_line "symlink"
assert_contains "$IT_ERR" "symlink" "a /dev/shm symlink: refused"
assert_contains "$IT_ERR" "nothing changed" "a /dev/shm symlink: nothing changed"
assert_eq "$hostile_root_before" "$(awk '$5 == "/"' "/proc/$(dpid hostile)/mountinfo")" \
  "a /dev/shm symlink: the container's root mount is unchanged"

# --- two resizes at once take turns; a container that exits while a resize waits ---------------
# The test holds the container's lock (as a resize in progress does) to make the race certain.
lock_of() { echo "/run/gpu-run/resize/$(docker inspect -f '{{.Id}}' "$1").lock"; }
start --name race "$IMAGE" sh -c 'exec 3>/dev/shm/keep; echo hi >&3; sleep 300'
rid=$(docker inspect -f '{{.Id}}' race)
mkdir -p /run/gpu-run/resize
exec {held}>"$(lock_of race)"
flock "$held"
# {held}>&-: the resizes must not inherit the test's descriptor (flock belongs to it).
"$CTL" resize race 100m >"$work/r1.out" 2>"$work/r1.err" {held}>&- &
r1=$!
"$CTL" resize race 200m >"$work/r2.out" 2>"$work/r2.err" {held}>&- &
r2=$!
sleep 1
kill -0 "$r1" 2>/dev/null && kill -0 "$r2" 2>/dev/null && it_pass "race: both resizes wait while the lock is held" ||
  it_fail "race: a resize did not wait for the lock"
assert_contains "$(cat "$work/r1.err")" "waiting for another resize of container race" "race: says it waits"
assert_eq 65536 "$(inside_kb docker race)" "race: nothing changed while they wait"
exec {held}>&-
rc1=0 rc2=0
wait "$r1" || rc1=$?
wait "$r2" || rc2=$?
assert_eq "0 0" "$rc1 $rc2" "race: both resizes succeed once the lock is free"
mapfile -t race_lines < <(grep -F "container=$rid " "$log" | grep ' action=resized ' | tail -n 2)
after1=$(grep -o ' after=[0-9a-z]*' <<<"${race_lines[0]:-}" | cut -d= -f2)
before2=$(grep -o ' before=[0-9a-z]*' <<<"${race_lines[1]:-}" | cut -d= -f2)
after2=$(grep -o ' after=[0-9a-z]*' <<<"${race_lines[1]:-}" | cut -d= -f2)
[[ -n $after1 && $before2 == "$after1" ]] && it_pass "race: the second started from the first's result ($after1)" ||
  it_fail "race: torn order in the log: ${race_lines[*]:-none}"
after2_mib=${after2%m}
assert_eq "$((${after2_mib:-0} * 1024))" "$(inside_kb docker race)" "race: df inside shows the last resize ($after2)"
assert_eq hi "$(docker exec race cat /dev/shm/keep)" "race: the open file survived both"
[[ ! -e $(lock_of race) ]] && it_pass "race: the last resize removed the container's lock file" ||
  it_fail "race: $(lock_of race) stays behind after the resizes"

start --name leaving "$IMAGE" sleep 300
exec {held}>"$(lock_of leaving)"
flock "$held"
"$CTL" resize leaving 100m >"$work/r3.out" 2>"$work/r3.err" {held}>&- &
r3=$!
sleep 0.5
docker kill leaving >/dev/null
exec {held}>&-
rc3=0
wait "$r3" || rc3=$?
assert_eq 2 "$rc3" "exited mid-resize: exit 2"
assert_contains "$(cat "$work/r3.err")" "container leaving stopped while its resize waited for another one: nothing changed" \
  "exited mid-resize: says why"
assert_not_contains "$(cat "$work/r3.err")" "terminate" "exited mid-resize: no crash"
assert_eq "" "$(cat "$work/r3.out")" "exited mid-resize: nothing resized"

# ============================== podman ==============================================
p=$(it_tmpdir)
it_on_exit it_podman_cleanup "$p"
it_podman_env "$p"
it_podman_image "$IMAGE"
pstart() { podman run -d "$@" >/dev/null 2>&1 || it_die "podman run $* failed"; }

pstart --name pkeep --ipc private "$IMAGE" sh -c 'exec 3>/dev/shm/keep; echo hi >&3; sleep 300'
assert_exit 0 resize --engine podman pkeep 100m
assert_contains "$IT_OUT" "container pkeep (" "podman private: names the container"
assert_contains "$IT_OUT" "\`podman inspect\` keeps showing the old ShmSize" "podman: says inspect keeps the old size"
assert_eq 102400 "$(inside_kb podman pkeep)" "podman private: df inside shows 100 MiB"
assert_eq hi "$(podman exec pkeep cat /dev/shm/keep)" "podman private: the open file survived"

# A pod: its infra container owns the IPC namespace and /dev/shm. The infra image needs a
# command that stays up (podman's own pause image needs catatonit).
if ! { podman run --name mkpause "$IMAGE" sh -c 'printf "#!/bin/sh\nexec sleep 100000\n" >/pause && chmod 755 /pause' \
  >/dev/null 2>&1 && podman commit -q mkpause gr-pause >/dev/null && podman rm mkpause >/dev/null; }; then
  it_die "building the pause image failed"
fi
podman pod create --name pod1 --infra-image localhost/gr-pause --infra-command /pause >/dev/null ||
  it_die "podman pod create failed"
pstart --pod pod1 --name m1 "$IMAGE" sleep 300
pstart --pod pod1 --name m2 "$IMAGE" sleep 300
assert_exit 0 resize --engine podman m1 200m
assert_contains "$IT_OUT" "it uses the IPC namespace of container" "pod: resolves to the infra container"
assert_eq 204800 "$(inside_kb podman m1)" "pod: m1 sees 200 MiB"
assert_eq 204800 "$(inside_kb podman m2)" "pod: m2 sees 200 MiB"

# podman's inspect says "shareable" for --ipc host and none too: the namespace and device tell.
pstart --name phost --ipc host "$IMAGE" sleep 300
assert_exit 2 resize --engine podman phost 200m
assert_contains "$IT_ERR" "shares the host's IPC namespace" "podman --ipc host: refused"
pstart --name pnone --ipc none "$IMAGE" sleep 300
assert_exit 2 resize --engine podman pnone 200m
assert_contains "$IT_ERR" "has no /dev/shm" "podman --ipc none: refused"

# --- the host and the log ----------------------------------------------------------------------
bad_lines=$(grep -cv '^[0-9T:Z-]* gpu-run-ctl\[[0-9]*\] level=[a-z]* container=' "$log")
assert_eq 0 "$bad_lines" "every log line is one whole key=value line"
assert_eq 13 "$(resized_lines)" "one log line per resize"
assert_eq "$host_line_before" "$(host_shm_line)" "the host's /dev/shm mount is unchanged"
assert_eq "$host_kb_before" "$(host_shm_kb)" "the host's /dev/shm size is unchanged"
it_done
