#!/usr/bin/env bash
# `gpu-run-ctl configure containerd` on the layout NVIDIA Container Toolkit 1.18 leaves: config.toml
# keeps runc as its default and imports conf.d/*.toml, where 99-nvidia.toml carries the whole CRI
# section with "nvidia" (a stand-in nvidia-container-runtime: logs its argv, execs runc) the default.
# gpu-run finds that default as containerd 1.6 merges the files, writes its own drop-in read after
# NVIDIA's, leaves config.toml byte for byte, and a pod through the gpu-run handler over the CRI is
# sized AND passes through the stand-in. doctor notices when the toolkit rewrites its drop-in
# (gpu-run's copy then hides the change), configure copies it again, --undo removes the drop-in.
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

# config.toml as nvidia-ctk 1.18 leaves it: the import added, runc still its default. The drop-in:
# `version` and a copy of config.toml's whole CRI section, "nvidia" added and made the default.
it_cri_config "$D"
CFG=$D/config.toml
mkdir -p "$D/conf.d"
DROP=$D/conf.d/99-zz-gpu-run.toml
{ printf 'imports = ["%s/conf.d/*.toml"]\n' "$D"; cat "$CFG"; } >"$D/with-import.toml"
mv "$D/with-import.toml" "$CFG"
nvidia_dropin() { # nvidia_dropin [EXTRA_HANDLER]: the toolkit's 99-nvidia.toml
  local h bin
  printf 'version = 2\n\n'
  sed -n '/^\[plugins\]/,$p' "$CFG" | sed 's/default_runtime_name = "runc"/default_runtime_name = "nvidia"/'
  for h in nvidia "$@"; do
    bin=$NV
    [[ $h == nvidia ]] || bin=$NV.${h#nvidia-}
    cat <<EOT

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$h]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$h.options]
          BinaryName = "$bin"
EOT
  done
}
nvidia_dropin >"$D/conf.d/99-nvidia.toml"
cp "$CFG" "$D/before.toml"
dump() { containerd --config "$CFG" config dump 2>/dev/null; }
# handler_table NAME: the handler's lines in containerd's own dump.
handler_table() { dump | awk -v h="runtimes.$1" 'index($0, h "]") { on = 1 } on && /^ *\[/ && !index($0, h) { on = 0 } on'; }

# --- control: containerd 1.6 takes the CRI section from NVIDIA's drop-in -----------------------------
assert_contains "$(dump)" 'default_runtime_name = "nvidia"' "control: containerd's merged config has NVIDIA's default"
assert_contains "$(grep default_runtime_name "$CFG")" '"runc"' "control: config.toml alone says runc"

# --- configure --dry-run: the chain found through the import, nothing written --------------------------
assert_exit 0 "$CTL" configure containerd --containerd-config "$CFG" --runtime-path "$RUNTIME" --dry-run
assert_contains "$IT_ERR" "chain: gpu-run-runtime -> nvidia-container-runtime ($NV, containerd's default runtime \"nvidia\"" \
  "--dry-run chains NVIDIA's default from the drop-in"
assert_contains "$IT_ERR" "would write" "--dry-run says it would write"
assert_contains "$IT_ERR" "$DROP" "--dry-run names gpu-run's drop-in"
assert_eq no "$([[ -e $DROP ]] && echo yes || echo no)" "--dry-run writes no drop-in"

# --- configure: gpu-run's drop-in, read after NVIDIA's; config.toml unchanged ----------------------------
assert_exit 0 "$CTL" configure containerd --containerd-config "$CFG" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "wrote $DROP: runtime handler gpu-run" "configure writes its drop-in"
assert_contains "$IT_OUT" "$CFG is not changed" "configure says config.toml is not changed"
assert_eq "" "$(cmp "$CFG" "$D/before.toml" 2>&1)" "config.toml is byte for byte what it was"
assert_eq no "$([[ -e $CFG.gpu-run.bak ]] && echo yes || echo no)" "no backup of config.toml: nothing to restore"
assert_eq "runtime=$NV" "$(grep '^runtime=' "$D/gpu-run-runtime.gpu-run")" "the chain file names NVIDIA's binary"
assert_contains "$(handler_table gpu-run)" "BinaryName = \"$D/gpu-run-runtime.gpu-run\"" \
  "containerd's merged config has gpu-run's handler"
assert_contains "$(handler_table nvidia)" "BinaryName = \"$NV\"" "containerd's merged config keeps NVIDIA's handler"
assert_contains "$(dump)" 'default_runtime_name = "nvidia"' "NVIDIA's stays the default"
assert_contains "$(dump)" "sandbox_image = \"$IT_CRI_IMAGE\"" "the rest of the CRI section is kept"
assert_exit 0 "$CTL" configure containerd --containerd-config "$CFG" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "already configured" "configure again changes nothing"

it_cri_start "$D"
it_cri_image "$D"
creates() { grep -c " create --bundle [^ ]*/$1 " "$NV_LOG" || true; }
shm_kib() { it_cri exec "$1" df -k /dev/shm | awk 'NR == 2 { print $2 }'; }

# --- a pod through gpu-run's handler over the CRI: sized, and through the stand-in --------------------
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
  "doctor: the gpu-run handler reaches NVIDIA's runtime through the drop-ins"
assert_eq "" "$(jq -r '.findings[] | select(.check == "containerd-dropin") | .level' <<<"$IT_OUT")" \
  "doctor: gpu-run's drop-in is in step with NVIDIA's"

# --- the toolkit rewrites its drop-in: doctor warns, configure copies the section again -------------------
nvidia_dropin nvidia-cdi >"$D/conf.d/99-nvidia.toml"
assert_eq "" "$(handler_table nvidia-cdi)" "control: gpu-run's older copy, read last, hides the toolkit's new handler"
assert_exit 3 "$CTL" doctor --containerd-config "$CFG" --daemon-json "$D/none.json" --json
assert_eq WARN "$(jq -r '.findings[] | select(.check == "containerd-dropin") | .level' <<<"$IT_OUT")" \
  "doctor warns that gpu-run's copy of the CRI section is stale"
assert_contains "$(jq -r '.findings[] | select(.check == "containerd-dropin") | .message' <<<"$IT_OUT")" \
  'key plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi added' "doctor names what changed"
assert_exit 0 "$CTL" configure containerd --containerd-config "$CFG" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "the CRI section changed since gpu-run's drop-in copied it" "configure says it copies again"
assert_contains "$(handler_table nvidia-cdi)" "BinaryName = \"$NV.cdi\"" "after configure: the toolkit's new handler is back"
assert_eq "" "$(cmp "$CFG" "$D/before.toml" 2>&1)" "config.toml is still byte for byte what it was"

# --- --undo: the drop-in goes, config.toml stays; the pod keeps its /dev/shm across a restart -------------
assert_exit 0 "$CTL" configure containerd --undo --containerd-config "$CFG"
assert_contains "$IT_OUT" "$DROP: removed" "--undo removes gpu-run's drop-in"
assert_eq no "$([[ -e $DROP ]] && echo yes || echo no)" "the drop-in is gone"
assert_eq "" "$(cmp "$CFG" "$D/before.toml" 2>&1)" "--undo leaves config.toml as it was"
assert_eq "" "$(handler_table gpu-run)" "containerd's merged config has no gpu-run handler"
it__stop_pid "$(cat "$D/containerd.pid")" 20
it_cri_start "$D"
assert_eq $((300 * 1024)) "$(shm_kib "$c0")" "after --undo and a restart: the pod started through gpu-run keeps its 300m"
it_cri pod --name after --handler gpu-run >"$D/after.json" 2>"$D/after.err"
assert_eq 1 $? "after --undo and a restart: containerd has no gpu-run handler"
it_cri rm-pod "$pod" >/dev/null
assert_eq 0 $? "after --undo: the pod started through gpu-run is removed"
it_done
