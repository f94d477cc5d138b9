#!/usr/bin/env bash
# `gpu-run-ctl configure containerd` on a containerd laid out as the GPU Operator's toolkit leaves
# it (handlers nvidia, nvidia-cdi and nvidia-legacy, "nvidia" the default, container_annotations
# cdi.k8s.io/*), with a stand-in nvidia-container-runtime (logs its argv, execs runc) as their
# BinaryName: the gpu-run handler chains the default handler's binary and copies its settings, so
# a pod run through the CRI with the gpu-run handler is sized AND its sandbox and container pass
# through the stand-in. doctor on the host finds the handler chained. --undo gives config.toml
# back byte for byte, refuses (one line, nothing touched) a file edited in between, and a pod
# started before keeps its /dev/shm across containerd's restart on the restored file.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=cri/cri_lib.sh
source "$HERE/cri/cri_lib.sh"

it_require_root
it_require_cmd containerd ctr runc jq cmp
it_binaries "${1:-}" gpu-run-ctl gpu-run-runtime
CTL=$IT_BIN/gpu-run-ctl
RUNTIME=$IT_BIN/gpu-run-runtime
D=$(it_tmpdir)
it_on_exit it_cri_stop "$D"
IT_CRI_SOCK=$D/ctd.sock
export IT_CRI_SOCK
it_rootfs

LOG=$D/gpu-run.log
printf '{"log_file": "%s"}\n' "$LOG" >"$D/gpu-run.json"
export GPU_RUN_CONFIG=$D/gpu-run.json
NV_LOG=$D/nvidia.log
it_nvidia_standin "$D/toolkit" "$NV_LOG"
NV=$D/toolkit/nvidia-container-runtime
ln -s nvidia-container-runtime "$D/toolkit/nvidia-container-runtime.cdi"
ln -s nvidia-container-runtime "$D/toolkit/nvidia-container-runtime.legacy"

# The base config, then the toolkit's handlers (as nvidia-ctk-installer writes them: a copy of
# runc's table each, BinaryName under its toolkit directory) and "nvidia" the default.
it_cri_config "$D"
CFG=$D/config.toml
sed -i 's/default_runtime_name = "runc"/default_runtime_name = "nvidia"/' "$CFG"
for h in nvidia nvidia-cdi nvidia-legacy; do
  bin=$NV
  [[ $h == nvidia ]] || bin=$NV.${h#nvidia-}
  cat >>"$CFG" <<EOT

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$h]
        container_annotations = ["cdi.k8s.io/*"]
        privileged_without_host_devices = false
        runtime_engine = ""
        runtime_root = ""
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$h.options]
          BinaryName = "$bin"
EOT
done
cp "$CFG" "$D/before.toml"

# --- configure --dry-run: the chain, nothing written ---------------------------------------------
assert_exit 0 "$CTL" configure containerd --containerd-config "$CFG" --runtime-path "$RUNTIME" --dry-run
assert_contains "$IT_ERR" "chain: gpu-run-runtime -> nvidia-container-runtime ($NV, containerd's default runtime \"nvidia\"" \
  "--dry-run shows the chain"
assert_eq "" "$(cmp "$CFG" "$D/before.toml" 2>&1)" "--dry-run leaves config.toml as it was"

# --- configure: the handler runs the chain file, with the default handler's settings ---------------
assert_exit 0 "$CTL" configure containerd --containerd-config "$CFG" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "BinaryName = $D/gpu-run-runtime.gpu-run" "configure says the handler runs the chain file"
assert_eq "runtime=$NV" "$(grep '^runtime=' "$D/gpu-run-runtime.gpu-run")" "the chain file names the default handler's binary"
dump=$(containerd --config "$CFG" config dump 2>/dev/null |
  awk '/runtimes.gpu-run\]/ { on = 1 } on && /^ *\[/ && !/runtimes.gpu-run/ { on = 0 } on')
assert_contains "$dump" "BinaryName = \"$D/gpu-run-runtime.gpu-run\"" "containerd reads the handler's BinaryName"
assert_contains "$dump" 'container_annotations = ["cdi.k8s.io/*"]' "the handler has the default handler's container_annotations"
assert_contains "$dump" 'pod_annotations = ["gpu-run.*", "io.kubernetes.cri-o.ShmSize"]' "the handler lets gpu-run's annotations through"

it_cri_start "$D"
it_cri_image "$D"
creates() { grep -c " create --bundle [^ ]*/$1 " "$NV_LOG" || true; }
shm_kib() { it_cri exec "$1" df -k /dev/shm | awk 'NR == 2 { print $2 }'; }

# --- control: the stand-in runs the default handler's pods ----------------------------------------
it_cri pod --name plain --handler "" >"$D/plain.json" 2>"$D/plain.err"
assert_eq 0 $? "a pod of the default handler starts ($(cat "$D/plain.err"))"
assert_eq 1 "$(creates "$(jq -r .pod "$D/plain.json")")" "control: the stand-in ran the default handler's sandbox"

# --- a pod through gpu-run's handler: sized, and through the stand-in -------------------------------
it_cri pod --name sized --handler gpu-run --annotations '{"gpu-run.shm-size": "300m"}' >"$D/sized.json" 2>"$D/sized.err"
assert_eq 0 $? "a pod of the gpu-run handler starts ($(cat "$D/sized.err"))"
pod=$(jq -r .pod "$D/sized.json")
c0=$(jq -r '.containers[0]' "$D/sized.json")
assert_eq $((300 * 1024)) "$(shm_kib "$c0")" "the gpu-run handler's pod sees /dev/shm at 300m"
assert_eq 1 "$(creates "$pod")" "the stand-in ran the create of the pod's sandbox, after gpu-run-runtime"
assert_eq 1 "$(creates "$c0")" "the stand-in ran the create of the pod's container"
assert_contains "$(grep "$pod" "$LOG")" "runtime=$NV action=resized" "gpu-run-runtime's line names the runtime it execs"
assert_exit 0 "$CTL" doctor --containerd-config "$CFG" --daemon-json "$D/none.json" --json
assert_eq OK "$(jq -r '.findings[] | select(.check == "runtime-chain") | .level' <<<"$IT_OUT")" \
  "doctor: the gpu-run handler reaches NVIDIA's runtime"

# --- --undo refuses a file edited in between, in one line, and touches nothing ---------------------
cp "$CFG" "$D/configured.toml"
printf '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n  runtime_type = "io.containerd.kata.v2"\n' >>"$CFG"
cp "$CFG" "$D/edited.toml"
assert_exit 2 "$CTL" configure containerd --undo --containerd-config "$CFG"
assert_eq 1 "$(printf '%s\n' "$IT_ERR" | wc -l)" "an edited file: the refusal is one line"
assert_contains "$IT_ERR" "changed since gpu-run-ctl configure wrote it (key plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata added)" \
  "an edited file: the refusal names the key"
assert_eq "" "$(cmp "$CFG" "$D/edited.toml" 2>&1)" "an edited file is left untouched"
cp "$D/configured.toml" "$CFG"

# --- --undo: config.toml back byte for byte; the pod keeps its /dev/shm across a restart ---------------
assert_exit 0 "$CTL" configure containerd --undo --containerd-config "$CFG"
assert_eq "" "$(cmp "$CFG" "$D/before.toml" 2>&1)" "--undo: config.toml is byte for byte what it was"
assert_eq no "$([[ -e $CFG.gpu-run.bak ]] && echo yes || echo no)" "--undo removes the backup it restored"
assert_contains "$IT_OUT" "$D/gpu-run-runtime.gpu-run stays" "--undo says the chain file stays"
it__stop_pid "$(cat "$D/containerd.pid")" 20
it_cri_start "$D"
assert_eq $((300 * 1024)) "$(shm_kib "$c0")" \
  "after --undo and a containerd restart: the pod started through gpu-run keeps its 300m"
it_cri pod --name after --handler gpu-run >"$D/after.json" 2>"$D/after.err"
assert_eq 1 $? "after --undo and a restart: containerd has no gpu-run handler"
assert_contains "$(cat "$D/after.err")" 'no runtime for "gpu-run" is configured' \
  "after --undo: a pod asking for the handler fails RunPodSandbox, saying so"
it_cri rm-pod "$pod" >/dev/null
assert_eq 0 $? "after --undo: the pod started through gpu-run is removed"
it_done
