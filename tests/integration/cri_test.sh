#!/usr/bin/env bash
# gpu-run-runtime as containerd's runtime handler "gpu-run", driven through the CRI gRPC API as
# the kubelet drives it (RunPodSandbox with host networking, CreateContainer, StartContainer,
# ExecSync), against Debian's containerd started privately (its own root, state, sockets and
# config under one mktemp directory). Checks what the pod's containers see in /dev/shm.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=cri/cri_lib.sh
source "$HERE/cri/cri_lib.sh"

it_require_root
it_require_cmd containerd ctr runc jq
BIN=${GPU_RUN_BIN_DIR:-$(dirname "${1:-}")}
[[ -x $BIN/gpu-run-runtime && -x $BIN/gpu-run-hook && -x $BIN/gpu-run-ctl ]] ||
  it_die "gpu-run binaries not found in '$BIN' (set GPU_RUN_BIN_DIR)"
ROOT=$(cd "$HERE/../.." && pwd)

# The pods' cgroup parent (the kubelet's pod cgroup), made by this test with a memory limit.
POD_CG=gr-cri-pod-$$-$RANDOM
# rm_pod_cgroup NAME: removes NAME and what runc left below it, in every hierarchy (after the
# pods are gone: registered first, it runs after it_cri_stop).
rm_pod_cgroup() {
  local d
  for d in /sys/fs/cgroup/"$1" /sys/fs/cgroup/*/"$1"; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}
it_on_exit rm_pod_cgroup "$POD_CG"
it_on_exit rm_pod_cgroup "$POD_CG-none"
D=$(it_tmpdir)
it_on_exit it_cri_stop "$D"
IT_CRI_SOCK=$D/ctd.sock  # read by cri_lib.sh
export IT_CRI_SOCK
it_rootfs

LOG=$D/gpu-run.log
cat >"$D/gpu-run.json" <<EOT
{"log_file": "$LOG", "log_level": "info", "profile_dirs": ["$ROOT/profiles"]}
EOT
export GPU_RUN_CONFIG=$D/gpu-run.json

# The handler, as an admin would add it: gpu-run-ctl configure containerd on the base config.
it_cri_config "$D"
it_cri_handler "$D" "$BIN"
grep -q 'runtimes.gpu-run' "$D/config.toml" || it_die "configure containerd wrote no gpu-run handler"

# What gpu-run-runtime execs: the config's runtimes ("runc"), on PATH (the log line names it).
RUNC=$(command -v runc)
host_shm_before=$(stat -f -c '%b %S' /dev/shm)
host_shm_opts_before=$(awk '$2 == "/dev/shm" { print $4 }' /proc/self/mounts)

it_cri_start "$D"  # containerd inherits GPU_RUN_CONFIG, and hands it to the shim and runtime
it_cri_image "$D"
it_log "containerd $(it_cri version)"

# plan_bytes ARGS...: the size gpu-run-ctl plans for ARGS, in bytes.
plan_bytes() { "$BIN/gpu-run-ctl" plan --json "$@" | jq -r .shm_bytes; }
# shm_kib CONTAINER: /dev/shm's size in KiB as the container sees it.
shm_kib() { it_cri exec "$1" df -k /dev/shm | awk 'NR == 2 { print $2 }'; }
# sandbox_shm_opts POD: the mount options of the pod's shm tmpfs on the host.
sandbox_shm_opts() { awk -v m="$D/state/io.containerd.grpc.v1.cri/sandboxes/$1/shm" '$2 == m { print $4 }' /proc/self/mounts; }
# pod OUT NAME ARGS...: runs a pod (cri_client.py pod), its JSON in OUT, the CRI error in OUT.err.
pod() {
  local out=$1 name=$2
  shift 2
  it_cri pod --name "$name" --handler gpu-run "$@" >"$out" 2>"$out.err"
}

# --- a pod that names a profile: both containers see the planned size, and share it ---------
# imagenet with 4 workers a rank: a plan above min_shm (256 MiB), so the size is the model's. No
# GPU reaches the pod on this host (no /dev/nvidiaN), so the runtime plans its pinned loader as
# PyTorch runs it there, unpinned: gpu-run's plan with --gpu-request none.
want=$("$BIN/gpu-run" --profile imagenet --gpus 2 --workers 4 --gpu-request none --json img | jq -r .plan.shm_bytes)
pod "$D/a.json" train --annotations '{"gpu-run.profile": "imagenet", "gpu-run.gpus": "2", "gpu-run.workers": "4"}' \
  --containers 2 --memory $((8 << 30))
assert_eq 0 $? "profile pod: RunPodSandbox, CreateContainer and StartContainer x2 succeed ($(cat "$D/a.json.err"))"
a_pod=$(jq -r .pod "$D/a.json")
a0=$(jq -r '.containers[0]' "$D/a.json")
a1=$(jq -r '.containers[1]' "$D/a.json")
a0_kib=$(shm_kib "$a0")
a1_kib=$(shm_kib "$a1")
assert_eq $((want / 1024)) "$a0_kib" "profile pod: container 1 sees /dev/shm at the plan (imagenet, 2 GPUs, 4 workers)"
assert_eq $((want / 1024)) "$a1_kib" "profile pod: container 2 sees the same size"
it_log "profile pod: planned $want bytes; containers see ${a0_kib}k and ${a1_kib}k"
it_cri exec "$a0" sh -c 'echo from-c0 > /dev/shm/handoff'
assert_eq "from-c0" "$(it_cri exec "$a1" cat /dev/shm/handoff)" "profile pod: a file one container writes to /dev/shm the other reads"
assert_contains "$(sandbox_shm_opts "$a_pod")" "rw," "profile pod: the pod's shm tmpfs on the host stays read-write"
assert_contains "$(sandbox_shm_opts "$a_pod")" "size=$((want / 1024))k" "profile pod: the pod's shm tmpfs on the host has the planned size"
assert_eq 1 "$(grep -cE "gpu-run-runtime.*$a_pod\"? runtime=[^ ]+ action=resized .* where=host$" "$LOG")" \
  "profile pod: the runtime resized the pod's /dev/shm once, on the host, for the sandbox"
assert_eq 0 "$(grep -cE "gpu-run-hook.*$a_pod" "$LOG")" "profile pod: no hook ran for the sandbox"
assert_eq 2 "$(grep -cE "gpu-run-runtime.*($a0|$a1)\"? runtime=[^ ]+ action=unchanged .* before=$((want >> 20))m after=$((want >> 20))m where=host$" "$LOG")" \
  "profile pod: the runtime found the pod's tmpfs sized for both app containers (unchanged, no hook)"
assert_eq 0 "$(grep -cE "gpu-run-hook.*($a0|$a1)" "$LOG")" "profile pod: no hook ran for the app containers"

# --- GPUs from the app containers' devices: the pod grows to their plan ---------------------------
# The sandbox has no devices (a 1-rank plan); the app containers have two /dev/nvidiaN (here
# /dev/null and /dev/zero under those names), so their plan is for 2 ranks.
want=$(plan_bytes --profile imagenet --gpus 2 --workers 4)
one_rank=$(plan_bytes --profile imagenet --gpus 1 --workers 4)
[[ $one_rank -lt $want ]] && it_pass "devices: the 1-rank plan ($one_rank) is below the 2-rank plan ($want)" ||
  it_fail "devices: the 1-rank and 2-rank plans do not differ ($one_rank, $want): the case below proves nothing"
pod "$D/d.json" devices --annotations '{"gpu-run.profile": "imagenet", "gpu-run.workers": "4"}' \
  --device /dev/null:/dev/nvidia0 --device /dev/zero:/dev/nvidia1
assert_eq 0 $? "a pod whose app container has two GPU devices ($(cat "$D/d.json.err"))"
assert_eq $((want / 1024)) "$(shm_kib "$(jq -r '.containers[0]' "$D/d.json")")" \
  "GPU count from the app container's devices: the pod's /dev/shm grows to the 2-rank plan"

# --- app containers grow the pod's /dev/shm, never shrink it --------------------------------------
want=$(plan_bytes --profile imagenet)
pod "$D/g.json" shrink --annotations '{"gpu-run.profile": "imagenet"}' --env GPU_RUN_SHM_SIZE=100m --containers 2
assert_eq 0 $? "a pod whose app containers ask for less ($(cat "$D/g.json.err"))"
assert_eq $((want / 1024)) "$(shm_kib "$(jq -r '.containers[1]' "$D/g.json")")" \
  "app containers asking GPU_RUN_SHM_SIZE=100m keep the pod's planned size (grow only)"

# --- no annotations: containerd's 64 MiB -------------------------------------------------------
pod "$D/b.json" plain
assert_eq 0 $? "plain pod starts through the handler ($(cat "$D/b.json.err"))"
assert_eq 65536 "$(shm_kib "$(jq -r '.containers[0]' "$D/b.json")")" "plain pod: /dev/shm keeps containerd's 64 MiB"

# --- an explicit gpu-run.shm-size wins over the profile -------------------------------------
pod "$D/c.json" explicit --annotations '{"gpu-run.profile": "imagenet", "gpu-run.shm-size": "1536m"}' --containers 2
assert_eq 0 $? "explicit pod starts ($(cat "$D/c.json.err"))"
assert_eq $((1536 * 1024)) "$(shm_kib "$(jq -r '.containers[1]' "$D/c.json")")" "explicit gpu-run.shm-size=1536m wins"

# --- hostIPC: never touched ---------------------------------------------------------------------
pod "$D/h.json" hostipc --host-ipc --annotations '{"gpu-run.shm-size": "3g"}'
assert_eq 0 $? "hostIPC pod starts ($(cat "$D/h.json.err"))"
h_kib=$(shm_kib "$(jq -r '.containers[0]' "$D/h.json")")
assert_eq "$(df -k /dev/shm | awk 'NR == 2 { print $2 }')" "$h_kib" "hostIPC pod sees the host's /dev/shm, unresized"
assert_eq "$host_shm_before" "$(stat -f -c '%b %S' /dev/shm)" "hostIPC pod: the host's /dev/shm size is unchanged"
assert_contains "$(grep "$(jq -r .pod "$D/h.json")" "$LOG")" "no ipc namespace" "hostIPC pod: the sandbox is left alone (log)"
assert_contains "$(grep "$(jq -r '.containers[0]' "$D/h.json")" "$LOG")" "bind-mounted from the host (/dev/shm)" \
  "hostIPC pod: its app container, in the host's ipc namespace by path, is left alone (log)"

# --- impossible requests fail the pod, the message in the CRI error -------------------------
pod "$D/e1.json" toobig --annotations '{"gpu-run.shm-size": "100t"}'
assert_eq 1 $? "shm-size over the host's memory fails RunPodSandbox"
assert_contains "$(cat "$D/e1.json.err")" "gpu-run: shm-size 100TiB is more than this host's memory" \
  "the CRI error carries gpu-run's message"
pod "$D/e2.json" noprofile --annotations '{"gpu-run.profile": "no-such-profile"}'
assert_eq 1 $? "an unknown profile fails RunPodSandbox"
assert_contains "$(cat "$D/e2.json.err")" "unknown profile 'no-such-profile'" "the CRI error names the unknown profile"
pod "$D/e3.json" budget --annotations '{"gpu-run.shm-size": "3g"}' --memory $((1 << 30))
assert_eq 1 $? "3g of /dev/shm in a container limited to 1g fails the container's start"
assert_contains "$(cat "$D/e3.json.err")" "does not fit the memory limit" "the CRI error explains the memory budget"

# --- the pod's memory limit, on the pod's cgroup (as the kubelet sets it): the budget applies ------
# The sandbox's spec has no memory limit; its linux.cgroupsPath names a cgroup under the pod's
# (cgroupfs driver here: "/<cgroup_parent>/<id>"), whose memory limit gpu-run reads.
grep -A8 'runtimes.gpu-run\]' "$D/config.toml" | grep -q 'SystemdCgroup = true' &&
  it_die "this test's containerd config uses the systemd cgroup driver; the pod cgroup below is a cgroupfs path"
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  pod_cg_dir=/sys/fs/cgroup/$POD_CG pod_cg_file=memory.max
else
  pod_cg_dir=/sys/fs/cgroup/memory/$POD_CG pod_cg_file=memory.limit_in_bytes
fi
mkdir "$pod_cg_dir" && echo $((1 << 30)) >"$pod_cg_dir/$pod_cg_file" ||
  it_die "cannot make the pod cgroup $pod_cg_dir with a 1 GiB $pod_cg_file"
pod "$D/m1.json" podlimit --cgroup-parent "/$POD_CG" --annotations '{"gpu-run.shm-size": "600m"}'
assert_eq 1 $? "600m of /dev/shm in a pod whose cgroup is limited to 1g fails RunPodSandbox"
assert_contains "$(cat "$D/m1.json.err")" "gpu-run: shm-size 600MiB does not fit the memory limit 1GiB" \
  "the CRI error carries the budget of the pod's limit"
assert_contains "$(cat "$D/m1.json.err")" "raise the pod's memory limit to at least 1200m" \
  "the CRI error says to raise the pod's memory limit"
it_log "pod cgroup limited to 1g, gpu-run.shm-size=600m: $(cat "$D/m1.json.err")"
pod "$D/m2.json" podlimit-ok --cgroup-parent "/$POD_CG" --annotations '{"gpu-run.shm-size": "500m"}' --containers 2
assert_eq 0 $? "500m of /dev/shm in a pod whose cgroup is limited to 1g starts ($(cat "$D/m2.json.err"))"
m2_pod=$(jq -r .pod "$D/m2.json")
assert_eq "/$POD_CG/$m2_pod" \
  "$(jq -r .linux.cgroupsPath "$D/state/io.containerd.runtime.v2.task/k8s.io/$m2_pod/config.json")" \
  "the sandbox's spec names a cgroup under the pod's (cgroupfs driver)"
assert_eq null "$(jq -r .linux.resources.memory.limit "$D/state/io.containerd.runtime.v2.task/k8s.io/$m2_pod/config.json")" \
  "the sandbox's spec has no memory limit of its own"
assert_eq $((500 * 1024)) "$(shm_kib "$(jq -r '.containers[1]' "$D/m2.json")")" \
  "a request under the pod's budget: the pod's containers see 500m"
it_cri rm-pod "$m2_pod" >/dev/null || it_fail "cannot remove the pod $m2_pod"
pod "$D/m3.json" podlimit-none --cgroup-parent "/$POD_CG-none" --annotations '{"gpu-run.shm-size": "600m"}'
assert_eq 0 $? "600m in a pod whose cgroup has no limit starts ($(cat "$D/m3.json.err"))"
it_cri rm-pod "$(jq -r .pod "$D/m3.json")" >/dev/null || it_fail "cannot remove the pod of m3"
rm_pod_cgroup "$POD_CG-none"

# --- hostile pods: a clear failure or no change; the host untouched -----------------------------
huge=$(head -c 200000 /dev/zero | tr '\0' 'a')
printf '{"gpu-run.profile": "%s"}' "$huge" >"$D/huge.json"
pod "$D/x1.json" huge --annotations "@$D/huge.json"
assert_eq 1 $? "a 200 KB profile annotation fails the pod"
assert_contains "$(cat "$D/x1.json.err")" "too long" "the CRI error says the value is too long"
pod "$D/x2.json" nul --annotations '{"gpu-run.shm-size": "1g\u0000; rm -rf /"}'
rc=$?
if [[ $rc -eq 0 ]]; then
  assert_eq 65536 "$(shm_kib "$(jq -r '.containers[0]' "$D/x2.json")")" "a NUL in shm-size changes nothing"
else
  assert_contains "$(cat "$D/x2.json.err")" "shm-size" "a NUL in shm-size fails the pod with a message about shm-size"
fi
pod "$D/x3.json" dotdot --annotations '{"gpu-run.profile": "../../../etc/passwd"}'
assert_eq 1 $? "a profile name with .. fails the pod"
assert_contains "$(cat "$D/x3.json.err")" "profile" "the CRI error is about the profile name"

# A host tmpfs mounted at /dev/shm as a volume (a hostPath): the host's, never resized.
mkdir -p "$D/vol"
mount -t tmpfs -o size=10m gr-cri-vol "$D/vol" || it_die "cannot mount a tmpfs on $D/vol"
if pod "$D/x5.json" volume --annotations '{"gpu-run.shm-size": "512m"}' --mount "$D/vol:/dev/shm"; then
  assert_eq 10240 "$(shm_kib "$(jq -r '.containers[0]' "$D/x5.json")")" "a hostPath tmpfs at /dev/shm: the container sees the volume, unresized"
else
  it_fail "a pod with a hostPath tmpfs at /dev/shm starts: $(cat "$D/x5.json.err")"
fi
assert_eq 10240 "$(df -k "$D/vol" | awk 'NR == 2 { print $2 }')" "a hostPath tmpfs at /dev/shm: the host's tmpfs keeps its 10m"

# An image whose /dev/shm is a symlink out of the container.
mkdir -p "$D/evil"
cp -a "$IT_ROOTFS" "$D/evil/rootfs"
rm -rf "$D/evil/rootfs/dev/shm"
ln -s /etc "$D/evil/rootfs/dev/shm"
(IT_ROOTFS=$D/evil/rootfs IT_CRI_IMAGE=docker.io/gpurun/evil:test it_cri_image "$D/evil")
if pod "$D/x4.json" evil --annotations '{"gpu-run.shm-size": "256m"}' --image docker.io/gpurun/evil:test; then
  x4=$(jq -r '.containers[0]' "$D/x4.json")
  assert_eq $((256 * 1024)) "$(shm_kib "$x4")" "an image with /dev/shm -> /etc: the pod's /dev/shm (containerd's tmpfs /dev hides the link)"
  assert_not_contains "$(it_cri exec "$x4" stat -f -c %T /etc)" "tmpfs" "an image with /dev/shm -> /etc: /etc is not mounted over"
else
  assert_contains "$(cat "$D/x4.json.err")" "/dev/shm" "an image with /dev/shm -> /etc fails with a message about /dev/shm"
fi
assert_eq "$host_shm_before" "$(stat -f -c '%b %S' /dev/shm)" "hostile pods: the host's /dev/shm size is unchanged"
assert_eq "$host_shm_opts_before" "$(awk '$2 == "/dev/shm" { print $4 }' /proc/self/mounts)" \
  "hostile pods: the host's /dev/shm mount options are unchanged"

# --- 20 pods in parallel: 20 right sizes, 20 whole log lines ---------------------------------
pids=()
for i in $(seq 1 20); do
  pod "$D/par$i.json" "par$i" --annotations "{\"gpu-run.shm-size\": \"$((100 + i))m\"}" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
assert_eq 0 "$failed" "20 pods started in parallel through the handler"
right=0 whole=0
for i in $(seq 1 20); do
  [[ -s $D/par$i.json ]] || continue
  [[ $(shm_kib "$(jq -r '.containers[0]' "$D/par$i.json")") == $(((100 + i) * 1024)) ]] && right=$((right + 1))
  p=$(jq -r .pod "$D/par$i.json")
  grep -qE "^[0-9T:-]+Z gpu-run-runtime\[[0-9]+\] level=info bundle=\"?[^ ]*/$p\"? runtime=$RUNC action=resized source=annotation size=$((100 + i))m reason=\"explicit size\" before=64m after=$((100 + i))m where=host$" "$LOG" &&
    whole=$((whole + 1))
done
assert_eq 20 "$right" "20 parallel pods: 20 right sizes"
assert_eq 20 "$whole" "20 parallel pods: 20 whole resize lines in the host log"

it_done
