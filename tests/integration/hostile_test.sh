#!/usr/bin/env bash
# Hostile images and inputs against gpu-run-hook (under real runc, and fed directly):
# each start fails or proceeds unchanged as docs/ARCHITECTURE.md ("Hardening") says, the host's mount table is
# unchanged, and the log says why.
set -u
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/oci_lib.sh"
it_require_root
it_require_cmd runc jq timeout

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_rootfs
cfg=$work/config.json
log=$work/gpu-run.log
printf '{"log_file": "%s"}\n' "$log" >"$cfg"
host_shm_before=$(df -k /dev/shm | tail -n 1 | awk '{print $2}')
mounts_before=$(host_mounts)

# A writable copy of the busybox rootfs whose /dev the image controls: the spec mounts no
# tmpfs on /dev and no /dev/shm, so what the image put there is what the hook finds.
# With KEEP_DEV=1 the spec keeps its mounts (runc resolves them inside the rootfs).
hostile_bundle() {
  local dir=$1
  mkdir -p "$dir"
  cp -a "$IT_ROOTFS" "$dir/rootfs"
  new_bundle "$dir" "$dir/rootfs"
  edit_bundle "$dir" '.root.readonly = false'
  [[ ${KEEP_DEV:-0} == 1 ]] ||
    edit_bundle "$dir" '.mounts |= map(select(.destination != "/dev" and .destination != "/dev/shm" and .destination != "/dev/pts" and .destination != "/dev/mqueue"))'
  add_env "$dir" GPU_RUN_PROFILE=imagenet
  add_hook_entry "$dir" createRuntime "$cfg"
}

# /dev/shm a symlink to / in the image.
b=$work/shm-root
hostile_bundle "$b"
rm -rf "$b/rootfs/dev/shm" && ln -s / "$b/rootfs/dev/shm"
run_bundle "$b" "h-shmroot-$$" >/dev/null
assert_eq 1 $? "/dev/shm -> / : the start fails"
assert_contains "$(cat "$b/stderr")" "symlink" "the hook says /dev/shm is a symlink"
assert_contains "$(tail -n 1 "$log")" "symlink" "the log says why"

# /dev/shm a symlink into /proc.
b=$work/shm-proc
hostile_bundle "$b"
rm -rf "$b/rootfs/dev/shm" && ln -s /proc/1/root "$b/rootfs/dev/shm"
run_bundle "$b" "h-shmproc-$$" >/dev/null
assert_eq 1 $? "/dev/shm -> /proc/1/root : the start fails"
assert_contains "$(cat "$b/stderr")" "symlink" "refused as a symlink"

# /dev itself a symlink (runc follows it inside the rootfs for its own mounts; the hook does not).
b=$work/dev-link
KEEP_DEV=1 hostile_bundle "$b"
rm -rf "$b/rootfs/dev" && mkdir -p "$b/rootfs/elsewhere/shm" && ln -s /elsewhere "$b/rootfs/dev"
run_bundle "$b" "h-devlink-$$" >/dev/null
assert_eq 1 $? "/dev -> /elsewhere : the start fails (runc itself refuses it before any hook runs; the hook's own refusal is unit-tested in shm_mount_test)"

# A plain directory /dev/shm in an image /dev that is not a tmpfs: never mount into the image.
b=$work/dev-plain
hostile_bundle "$b"
run_bundle "$b" "h-devplain-$$" >/dev/null
assert_eq 1 $? "/dev of the image (no tmpfs): the start fails rather than mounting into the image"
assert_contains "$(cat "$b/stderr")" "not a tmpfs" "the message says /dev is not a tmpfs"

# Hostile annotations on an ordinary bundle: each fails the start with one line.
check_annotation() {
  local key=$1 value=$2 expect=$3 name=$4 b
  b=$work/annot-$name
  new_bundle "$b"
  printf '%s' "$value" >"$b/value"
  edit_bundle "$b" '.annotations[$k] = $v' --arg k "$key" --rawfile v "$b/value"
  add_hook_entry "$b" createRuntime "$cfg"
  run_bundle "$b" "h-$name-$$" >/dev/null
  assert_eq 1 $? "annotation $name: the start fails"
  assert_contains "$(cat "$b/stderr")" "$expect" "annotation $name: the message says why"
  assert_eq 1 "$(wc -l <"$b/stderr")" "annotation $name: one line on stderr"
}
check_annotation gpu-run.shm-size 99999999t "too large" huge
check_annotation gpu-run.shm-size -1g "negative" negative
check_annotation gpu-run.shm-size 1t "more than this host's memory" absurd
check_annotation gpu-run.profile "$(head -c 4097 /dev/zero | tr '\0' a)" "too long" long
# runc copies annotations into the state on stdin: 1 MB of them exceeds the hook's read bound.
check_annotation gpu-run.profile "$(head -c 1048576 /dev/zero | tr '\0' a)" "more than 1048576 bytes" megabyte
check_annotation gpu-run.profile "../../etc/passwd" "not a valid profile name" dotdot
check_annotation gpu-run.profile "/etc/gpu-run/x.json" "not a valid profile name" abspath
check_annotation gpu-run.gpus "2; rm -rf /" "invalid number" gpus-junk
check_annotation gpu-run.workers "-3" "negative" workers-negative

# A NUL byte inside an annotation value (JSON \u0000).
b=$work/annot-nul
new_bundle "$b"
edit_bundle "$b" '.annotations["gpu-run.profile"] = "imagenet\u0000../../x"'
add_hook_entry "$b" createRuntime "$cfg"
run_bundle "$b" "h-nul-$$" >/dev/null
assert_eq 1 $? "annotation with a NUL byte: the start fails"
assert_contains "$(cat "$b/stderr")" "not a valid profile name" "NUL byte: rejected as a name"

# Inputs fed to the hook directly.
assert_exit 1 "$HOOK" --config "$cfg" createRuntime <<<'{"id": "x", "pid": 1, "bundle": '
assert_contains "$("$HOOK" --config "$cfg" <<<'{"id": "x", "pid": 1, "bundle": ' 2>&1)" "malformed JSON" "truncated state: malformed JSON"
assert_contains "$("$HOOK" --config "$cfg" <<<'[1,2]' 2>&1)" "expected a JSON object" "state that is not an object"
assert_contains "$("$HOOK" --config "$cfg" <<<'{"id": "x", "pid": -5, "bundle": "/tmp"}' 2>&1)" "not a process id" "negative pid"
mkdir -p "$work/empty-bundle"
printf '{"ociVersion": "1.0.2", "id": "nobundle", "pid": 1, "bundle": "%s", "annotations": {"gpu-run.profile": "imagenet"}}' \
  "$work/empty-bundle" >"$work/state-nobundle.json"
out=$("$HOOK" --config "$cfg" <"$work/state-nobundle.json" 2>&1)
assert_eq 1 $? "a bundle without config.json: fails when the container asked"
assert_contains "$out" "config.json: cannot open" "a bundle without config.json: the message names the file"
start=$(date +%s)
out=$(timeout 20 "$HOOK" --config "$cfg" </dev/zero 2>&1)
rc=$?
assert_eq 1 "$rc" "endless stdin: the hook fails (not hangs: 124 would be the timeout)"
assert_contains "$out" "more than 1048576 bytes" "endless stdin: the read is bounded"
(($(date +%s) - start < 10)) && it_pass "endless stdin: fails fast" || it_fail "endless stdin took $(($(date +%s) - start))s"

# A log line per decision, whole lines only.
bad_lines=$(grep -cv '^[0-9T:Z-]* gpu-run-hook\[[0-9]*\] level=[a-z]* ' "$log")
assert_eq 0 "$bad_lines" "every log line is one whole key=value line"

assert_eq "$mounts_before" "$(host_mounts)" "the host's mount table is unchanged"
assert_eq "$host_shm_before" "$(df -k /dev/shm | tail -n 1 | awk '{print $2}')" "the host's /dev/shm size is unchanged"
it_done
