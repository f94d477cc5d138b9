#!/usr/bin/env bash
# gpu-run-hook through podman's hooks.d: `gpu-run-ctl configure podman --no-guard --hooks-dir DIR`
# installs the hook, then `podman --hooks-dir DIR run --annotation gpu-run.profile=...`
# gets its /dev/shm (podman's own tmpfs, bind-mounted in) resized; `configure podman --no-guard --undo`
# removes the file, and the next annotated container runs no hook.
set -u
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/oci_lib.sh"
it_require_root
it_require_cmd podman runc conmon jq
CTL=$BIN_DIR/gpu-run-ctl
[[ -x $CTL ]] || it_die "$CTL is not built"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
cfg=$work/config.json
log=$work/gpu-run.log
printf '{"log_file": "%s"}\n' "$log" >"$cfg"
hooks=$work/hooks.d
mkdir -p "$hooks"
"$CTL" configure podman --no-guard --hooks-dir "$hooks" --config "$cfg" >/dev/null
assert_eq 0 $? "gpu-run-ctl configure podman writes the hooks.d file"
assert_eq "$HOOK" "$(jq -r .hook.path "$hooks/gpu-run.json")" "the hooks.d file names the built hook"
"$CTL" configure podman --no-guard --hooks-dir "$hooks" --config "$cfg" >/dev/null
assert_eq 1 "$(ls "$hooks" | wc -l)" "configure podman is idempotent"

p=$(it_tmpdir)
it_on_exit it_podman_cleanup "$p"
it_podman_env "$p"
it_podman_image gr-busybox
shm_kib() { podman --hooks-dir "$hooks" run --rm "$@" gr-busybox sh -c 'df -k /dev/shm | tail -n 1' | awk '{print $2}'; }

assert_eq "$(expected_kib imagenet 2)" "$(shm_kib --annotation gpu-run.profile=imagenet --annotation gpu-run.gpus=2)" \
  "podman --annotation gpu-run.profile=imagenet --annotation gpu-run.gpus=2"
assert_contains "$(tail -n 1 "$log")" "action=resized" "the hook resized podman's shm tmpfs"
# podman's default /dev/shm is 65536000 bytes: the log says it in MiB as every size (issue 35).
assert_contains "$(tail -n 1 "$log")" " before=62.5m after=" "the log line's sizes in MiB, not before=65536000b"
assert_eq 307200 "$(shm_kib --annotation gpu-run.shm-size=300m)" "podman --annotation gpu-run.shm-size=300m"
assert_eq 64000 "$(shm_kib)" "no annotation: the hook does not run (podman's default 65536000 bytes)"

# One name per fact through the hook (issue 40): the workers as an annotation, and in the
# container's environment under either name, plan the size gpu-run --workers 8 plans.
req=(--annotation gpu-run.profile=imagenet --annotation gpu-run.gpus=2)
w8=$(expected_kib imagenet 2 --workers 8)
[[ $w8 != "$(expected_kib imagenet 2)" ]] && it_pass "8 workers plan another size than the default's" ||
  it_fail "8 workers planned as the default"
assert_eq "$w8" "$(shm_kib "${req[@]}" --annotation gpu-run.workers=8)" "podman --annotation gpu-run.workers=8"
assert_eq "$w8" "$(shm_kib "${req[@]}" -e GPU_RUN_WORKERS=8)" "podman -e GPU_RUN_WORKERS=8: the same size"
assert_eq "$w8" "$(shm_kib "${req[@]}" -e GPU_RUN_NUM_WORKERS=8)" "podman -e GPU_RUN_NUM_WORKERS=8: the same size"
out=$(podman --hooks-dir "$hooks" run --rm "${req[@]}" -e GPU_RUN_WORKERS=4 -e GPU_RUN_NUM_WORKERS=8 gr-busybox true 2>&1)
rc=$?
((rc != 0)) && it_pass "two workers values: podman run fails (exit $rc)" || it_fail "two workers values: podman run succeeded"
assert_contains "$out" "GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values" \
  "podman shows the hook's line naming both"
# The command line (the spec's process.args): the plan holds, the warning goes to the host log.
got=$(podman --hooks-dir "$hooks" run --rm "${req[@]}" gr-busybox sh -c 'echo train.py -j 8 >/dev/null; df -k /dev/shm | tail -n 1' |
  awk '{print $2}')
assert_eq "$(expected_kib imagenet 2)" "$got" "a command line of other workers keeps the hook's plan"
warn=$(grep 'action=warn warning=' "$log" | tail -n 1)
assert_contains "$warn" "the command line's '-j 8' asks for 8 DataLoader workers" "the hook logs the command line's workers"

out=$(podman --hooks-dir "$hooks" run --rm --annotation gpu-run.profile=imagenett gr-busybox true 2>&1)
rc=$?
((rc != 0)) && it_pass "unknown profile: podman run fails (exit $rc)" || it_fail "unknown profile: podman run succeeded"
assert_contains "$out" "unknown profile 'imagenett'" "podman shows the hook's message"

# --undo: the entry goes, and podman, which reads hooks.d for each container, runs no hook.
"$CTL" configure podman --no-guard --hooks-dir "$hooks" --undo >"$work/undo.out" 2>&1
assert_eq 0 $? "configure podman --no-guard --undo ($(cat "$work/undo.out"))"
assert_eq "" "$(ls -A "$hooks")" "--undo: the hooks.d entry is removed, nothing left in the directory"
assert_eq 64000 "$(shm_kib --annotation gpu-run.shm-size=300m)" "after --undo: an annotated container keeps podman's default"
"$CTL" configure podman --no-guard --hooks-dir "$hooks" --undo >"$work/undo.out" 2>&1
assert_contains "$(cat "$work/undo.out")" "does not exist: nothing to undo" "a second --undo has nothing to do"
it_done
