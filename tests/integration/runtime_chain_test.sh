#!/usr/bin/env bash
# `gpu-run-ctl configure docker` on a dockerd whose default runtime is NVIDIA's (a stand-in
# nvidia-container-runtime that logs its argv and execs runc, written as nvidia-ctk writes
# daemon.json): gpu-run's runtime chains it, so a container started with --runtime gpu-run is
# sized AND passes through the stand-in; --set-default keeps it in the chain; doctor on the host
# warns about an entry that bypasses it and is OK once chained; --undo gives daemon.json back
# byte for byte, refuses (one line, nothing touched) a file edited in between, and leaves a
# running container its /dev/shm, its exec and its removal; defaults that cannot be chained are
# refused and change nothing.
set -u
source "$(dirname "$0")/lib.sh"
it_require_root
it_require_cmd jq cmp
it_binaries "${1:-}" gpu-run-ctl gpu-run-runtime gpu-run
CTL=$IT_BIN/gpu-run-ctl
RUNTIME=$IT_BIN/gpu-run-runtime

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
export GPU_RUN_CONFIG=$d/gpu-run.json
LOG=$d/gpu-run.log
printf '{"log_file": "%s"}\n' "$LOG" >"$GPU_RUN_CONFIG"
NV_LOG=$d/nvidia.log
it_nvidia_standin "$d/nvidia" "$NV_LOG"
NV=$d/nvidia/nvidia-container-runtime
# As nvidia-ctk runtime configure --runtime=docker --set-as-default writes it (Go's
# json.MarshalIndent, four spaces, keys sorted; "args" is nvidia-ctk's, dockerd ignores it).
printf '{\n    "default-runtime": "nvidia",\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n            "path": "%s"\n        }\n    }\n}' \
  "$NV" >"$d/nvidia-ctk.json"
it_dockerd_start "$d" "$d/nvidia-ctk.json"
DJ=$d/daemon.json
cp "$DJ" "$d/before.json"
it_docker_image gpurun-busybox
reload() {
  kill -HUP "$(cat "$d/pid")"
  sleep 1
}
# shm_kib ARGS...: /dev/shm in KiB in `docker run --rm ARGS... gpurun-busybox`.
shm_kib() { docker run --rm "$@" gpurun-busybox sh -c 'df -k /dev/shm | tail -n 1' | awk '{print $2}'; }
creates() { grep -c ' create --bundle ' "$NV_LOG" 2>/dev/null || true; }

# --- control: the stand-in is dockerd's default and runs its containers ---------------------
: >"$NV_LOG"
assert_eq 65536 "$(shm_kib)" "control: a plain docker run under the stand-in default gets Docker's 64 MiB"
assert_eq 1 "$(creates)" "control: the stand-in ran the create of a plain docker run"

# --- doctor: an entry running gpu-run-runtime directly bypasses the stand-in -------------------
jq --arg rt "$RUNTIME" '.runtimes["gpu-run"] = {path: $rt}' "$DJ" >"$d/bypass.json"
assert_exit 3 "$CTL" doctor --daemon-json "$d/bypass.json" --containerd-config "$d/none.toml" --json
assert_eq WARN "$(jq -r '.findings[] | select(.check == "runtime-chain") | .level' <<<"$IT_OUT")" \
  "doctor: a gpu-run entry that execs runc next to NVIDIA's runtime is a WARN"
assert_contains "$(jq -r '.findings[] | select(.check == "runtime-chain") | .message' <<<"$IT_OUT")" \
  "bypassing the GPU runtime \"nvidia\" ($NV)" "doctor: names the runtime bypassed"

# --- configure --dry-run: the chain, nothing written --------------------------------------------
assert_exit 0 "$CTL" configure docker --no-guard --daemon-json "$DJ" --runtime-path "$RUNTIME" --dry-run
assert_contains "$IT_ERR" "chain: gpu-run-runtime -> nvidia-container-runtime ($NV, dockerd's default runtime \"nvidia\"" \
  "--dry-run shows the chain"
assert_contains "$IT_ERR" "would write $d/gpu-run-runtime.gpu-run:" "--dry-run names the chain file it would write"
assert_eq "" "$(cmp "$DJ" "$d/before.json" 2>&1)" "--dry-run leaves daemon.json as it was"
assert_eq no "$([[ -e $d/gpu-run-runtime.gpu-run ]] && echo yes || echo no)" "--dry-run writes no chain file"

# --- configure: the entry runs the chain file; the container is sized and the stand-in ran --------
assert_exit 0 "$CTL" configure docker --no-guard --daemon-json "$DJ" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "chain: gpu-run-runtime -> nvidia-container-runtime" "configure says what it chains"
assert_contains "$IT_OUT" "backup of the previous file (what --undo restores): $DJ.gpu-run.bak" "configure names the backup"
assert_eq "$d/gpu-run-runtime.gpu-run" "$(jq -r '.runtimes["gpu-run"].path' "$DJ")" "the entry runs the chain file"
assert_eq "nvidia" "$(jq -r '."default-runtime"' "$DJ")" "NVIDIA's stays the default"
assert_eq "$(cat "$d/before.json")" "$(cat "$DJ.gpu-run.bak")" "the backup is the file nvidia-ctk wrote"
assert_eq "755 runtime=$NV" "$(stat -c %a "$d/gpu-run-runtime.gpu-run") $(grep '^runtime=' "$d/gpu-run-runtime.gpu-run")" \
  "the chain file is executable and names the stand-in"
reload
want=$((200 * 1024))
: >"$NV_LOG"
assert_eq "$want" "$(shm_kib --runtime gpu-run -e GPU_RUN_SHM_SIZE=200m)" \
  "docker run --runtime gpu-run: /dev/shm is gpu-run's 200m"
assert_eq 1 "$(creates)" "docker run --runtime gpu-run: the stand-in ran the create after gpu-run-runtime"
assert_contains "$(grep 'gpu-run-runtime' "$LOG" | tail -n 1)" "runtime=$NV action=spec-size" \
  "gpu-run-runtime's log line names the runtime it execs"
assert_exit 0 "$CTL" doctor --daemon-json "$DJ" --containerd-config "$d/none.toml" --json
assert_eq OK "$(jq -r '.findings[] | select(.check == "runtime-chain") | .level' <<<"$IT_OUT")" \
  "doctor: the chained entry reaches NVIDIA's runtime"

sum=$(sha256sum <"$DJ")
assert_exit 0 "$CTL" configure docker --no-guard --daemon-json "$DJ" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "already configured" "a second configure changes nothing"
assert_eq "$sum" "$(sha256sum <"$DJ")" "a second configure leaves daemon.json as it is"

# --- --set-default: gpu-run first, the stand-in still behind it -----------------------------------
assert_exit 0 "$CTL" configure docker --no-guard --daemon-json "$DJ" --runtime-path "$RUNTIME" --set-default
assert_contains "$IT_OUT" "default-runtime was \"nvidia\", now \"gpu-run\", which execs \"nvidia\"" \
  "--set-default says what it chains"
assert_eq "$(cat "$d/before.json")" "$(cat "$DJ.gpu-run.bak")" "--set-default keeps the first backup"
reload
: >"$NV_LOG"
assert_eq $((100 * 1024)) "$(shm_kib -e GPU_RUN_SHM_SIZE=100m)" "--set-default: a plain docker run is sized"
assert_eq 1 "$(creates)" "--set-default: the stand-in ran its create"

# A container running, and one created, through gpu-run before the undo.
running=$(docker run -d --runtime gpu-run -e GPU_RUN_SHM_SIZE=150m gpurun-busybox sleep 300)
docker create --name made-before --runtime gpu-run gpurun-busybox true >/dev/null || it_die "docker create failed"
docker create --name made-by-default gpurun-busybox true >/dev/null || it_die "docker create failed"

# --- --undo refuses a file edited in between, in one line, and touches nothing --------------------
cp "$DJ" "$d/configured.json"
jq '."log-level" = "warn"' "$d/configured.json" >"$DJ"
cp "$DJ" "$d/edited.json"
assert_exit 2 "$CTL" configure docker --no-guard --undo --daemon-json "$DJ"
assert_eq 1 "$(printf '%s\n' "$IT_ERR" | wc -l)" "an edited file: the refusal is one line"
assert_contains "$IT_ERR" "$DJ changed since gpu-run-ctl configure wrote it (key 'log-level' added)" \
  "an edited file: the refusal names the change"
assert_contains "$IT_ERR" "remove runtimes.gpu-run and set default-runtime back" "an edited file: the refusal says what to do"
assert_eq "" "$(cmp "$DJ" "$d/edited.json" 2>&1)" "an edited file is left untouched"
assert_eq yes "$([[ -f $DJ.gpu-run.bak && -f $d/gpu-run-runtime.gpu-run ]] && echo yes || echo no)" \
  "an edited file: the backup and the chain file stay"
cp "$d/configured.json" "$DJ"

# --- --undo: daemon.json back byte for byte -----------------------------------------------------------
assert_exit 0 "$CTL" configure docker --no-guard --undo --daemon-json "$DJ" --dry-run
assert_eq "$(cat "$d/before.json")" "$IT_OUT" "--undo --dry-run prints the file it would restore"
assert_eq "" "$(cmp "$DJ" "$d/configured.json" 2>&1)" "--undo --dry-run writes nothing"
assert_exit 0 "$CTL" configure docker --no-guard --undo --daemon-json "$DJ"
assert_eq "" "$(cmp "$DJ" "$d/before.json" 2>&1)" "--undo: daemon.json is byte for byte what nvidia-ctk wrote"
assert_eq no "$([[ -e $DJ.gpu-run.bak ]] && echo yes || echo no)" "--undo removes the backup it restored"
assert_contains "$IT_OUT" "$d/gpu-run-runtime.gpu-run stays" "--undo says the chain file stays"
assert_exit 0 "$CTL" configure docker --no-guard --undo --daemon-json "$DJ"
assert_contains "$IT_OUT" "has no runtimes.gpu-run: nothing to undo" "a second --undo has nothing to do"
reload
: >"$NV_LOG"
assert_eq 65536 "$(shm_kib)" "after --undo: a plain docker run is NVIDIA's again, unsized"
assert_eq 1 "$(creates)" "after --undo: the stand-in runs the default's create"
assert_eq $((150 * 1024)) "$(docker exec "$running" df -k /dev/shm | awk 'NR == 2 { print $2 }')" \
  "after --undo: a container started through gpu-run keeps its /dev/shm, and docker exec works"
out=$(docker start made-before 2>&1)
assert_contains "$out" "Unknown runtime specified gpu-run" "after --undo: a container created with the runtime gpu-run no longer starts"
out=$(docker start made-by-default 2>&1)
assert_contains "$out" "Unknown runtime specified gpu-run" \
  "after --undo: a container created while gpu-run was the default no longer starts either"
start=$(date +%s)
docker rm -f "$running" >/dev/null
assert_eq 0 $? "after --undo: a container started through gpu-run is removed"
(($(date +%s) - start < 8)) && it_pass "after --undo: its removal is prompt (the chain file is still there)" ||
  it_fail "after --undo: docker rm -f took $(($(date +%s) - start)) s"

# --- defaults that cannot be chained: one line, nothing written ------------------------------------
refused() {  # refused NAME JSON SAYS: configure on DIR/NAME/daemon.json holding JSON
  local r=$d/refused/$1
  mkdir -p "$r"
  printf '%s\n' "$2" >"$r/daemon.json"
  cp "$r/daemon.json" "$r/orig.json"
  assert_exit 2 "$CTL" configure docker --no-guard --daemon-json "$r/daemon.json" --runtime-path "$RUNTIME"
  assert_eq 1 "$(printf '%s\n' "$IT_ERR" | wc -l)" "$1: one line"
  assert_contains "$IT_ERR" "$3" "$1: says why"
  assert_eq "" "$(cmp "$r/daemon.json" "$r/orig.json" 2>&1)" "$1: daemon.json is left as it was"
  assert_eq "daemon.json orig.json" "$(ls "$r" | sort | tr '\n' ' ' | sed 's/ $//')" "$1: no backup, no chain file"
}
refused missing '{"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "/nonexistent/nvidia-container-runtime"}}}' \
  "is /nonexistent/nvidia-container-runtime, which is not an executable file"
refused nopath '{"default-runtime": "nvidia", "runtimes": {"nvidia": {"runtimeType": "io.containerd.runsc.v1"}}}' \
  "the default runtime \"nvidia\" has no path"
refused loop "{\"default-runtime\": \"shm\", \"runtimes\": {\"shm\": {\"path\": \"$RUNTIME\"}}}" \
  "gpu-run-runtime itself: chaining it would loop"
refused unknown '{"default-runtime": "nvidia"}' "default-runtime is \"nvidia\" but runtimes.nvidia"
it_done
