#!/usr/bin/env bash
# gpu-run-hook under real runc: createRuntime and prestart, annotations over env,
# default_profile on and off, explicit requests that cannot be met.
set -u
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/oci_lib.sh"
it_require_root
it_require_cmd runc jq

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_rootfs
cfg=$work/config.json
log=$work/gpu-run.log
printf '{"log_file": "%s"}\n' "$log" >"$cfg"

imagenet2=$(expected_kib imagenet 2)
[[ $imagenet2 =~ ^[0-9]+$ ]] || it_die "cannot compute the expected size: $imagenet2"

for stage in createRuntime prestart; do
  b=$work/$stage
  new_bundle "$b"
  add_env "$b" GPU_RUN_PROFILE=imagenet GPU_RUN_GPUS=2
  add_hook_entry "$b" "$stage" "$cfg"
  out=$(run_bundle "$b" "t-$stage-$$")
  assert_eq "$imagenet2" "$out" "$stage hook: /dev/shm is the imagenet x2 plan"
done
assert_contains "$(cat "$log")" "action=resized" "the log records the resize"

# Annotations win over env.
b=$work/annot
new_bundle "$b"
add_env "$b" GPU_RUN_PROFILE=imagenet GPU_RUN_GPUS=2
edit_bundle "$b" '.annotations["gpu-run.profile"] = "medical"'
add_hook_entry "$b" createRuntime "$cfg"
assert_eq "$(expected_kib medical 2)" "$(run_bundle "$b" "t-annot-$$")" "annotation gpu-run.profile beats GPU_RUN_PROFILE"

# An explicit size, smaller than the default: explicit sizes may shrink.
b=$work/explicit
new_bundle "$b"
edit_bundle "$b" '.annotations["gpu-run.shm-size"] = "32m"'
add_hook_entry "$b" createRuntime "$cfg"
assert_eq 32768 "$(run_bundle "$b" "t-explicit-$$")" "explicit gpu-run.shm-size=32m applies (shrinks)"

# CRI-O's annotation.
b=$work/crio
new_bundle "$b"
edit_bundle "$b" '.annotations["io.kubernetes.cri-o.ShmSize"] = "300m"'
add_hook_entry "$b" createRuntime "$cfg"
assert_eq 307200 "$(run_bundle "$b" "t-crio-$$")" "io.kubernetes.cri-o.ShmSize=300m applies"

# default_profile off: a container that names nothing is left alone.
b=$work/nodefault
new_bundle "$b"
add_hook_entry "$b" createRuntime "$cfg"
assert_eq 65536 "$(run_bundle "$b" "t-nodef-$$")" "no request, no default_profile: 64 MiB untouched"

# default_profile on.
cfg_default=$work/config-default.json
printf '{"log_file": "%s", "default_profile": "mnist"}\n' "$log" >"$cfg_default"
b=$work/default
new_bundle "$b"
add_hook_entry "$b" createRuntime "$cfg_default"
assert_eq "$(expected_kib mnist 0)" "$(run_bundle "$b" "t-def-$$")" "default_profile mnist sizes a silent container"

# Host default that fails (bad default profile) with on_error warn: starts unchanged.
cfg_bad_default=$work/config-bad-default.json
printf '{"log_file": "%s", "default_profile": "no-such-profile"}\n' "$log" >"$cfg_bad_default"
b=$work/baddefault
new_bundle "$b"
add_hook_entry "$b" createRuntime "$cfg_bad_default"
assert_eq 65536 "$(run_bundle "$b" "t-baddef-$$")" "a failing host default is logged and the container starts unchanged"
assert_contains "$(tail -n 1 "$log")" "action=skip" "the log says the host default was skipped"

# Explicit requests that cannot be met fail the start with the hook's message.
b=$work/unknown
new_bundle "$b"
add_env "$b" GPU_RUN_PROFILE=imagenett
add_hook_entry "$b" createRuntime "$cfg"
run_bundle "$b" "t-unknown-$$" >/dev/null
assert_eq 1 $? "unknown profile: runc run fails"
assert_contains "$(cat "$b/stderr")" "unknown profile 'imagenett': did you mean imagenet?" "runc shows the hook's message"

b=$work/memlimit
new_bundle "$b"
add_env "$b" GPU_RUN_PROFILE=imagenet GPU_RUN_GPUS=2
edit_bundle "$b" '.linux.resources.memory = {limit: 402653184}'  # 384 MiB: at most 192 MiB of shm, the plan is at least 256
add_hook_entry "$b" createRuntime "$cfg"
run_bundle "$b" "t-mem-$$" >/dev/null
assert_eq 1 $? "plan over the memory limit: the start fails"
assert_contains "$(cat "$b/stderr")" "does not fit the memory limit" "the message names the memory limit"

it_done
