# shellcheck shell=bash
# Helpers for tests that drive gpu-run-hook under runc directly. Source after lib.sh.

BIN_DIR=${GPU_RUN_BIN_DIR:?GPU_RUN_BIN_DIR must point at the bin directory of a build}
HOOK=$BIN_DIR/gpu-run-hook
RUNTIME=$BIN_DIR/gpu-run-runtime
GPU_RUN=$BIN_DIR/gpu-run

# Expected /dev/shm in KiB for a profile/gpus as gpu-run plans it on this host.
expected_kib() {
  local profile=$1 gpus=$2
  shift 2
  "$GPU_RUN" --profile "$profile" --gpus "$gpus" --gpu-request none --json "$@" img |
    jq -r '.plan.shm_bytes / 1024 | floor'
}

# The host's mount table, for before/after comparisons. Other tests' private daemons under
# /tmp/gr-* (when tests run side by side) are left out, but not MINE (default: $work).
host_mounts() {
  awk -v mine="${1:-${work:-/nonexistent}}" \
    'index($2, "/tmp/gr-") != 1 || index($2, mine) == 1 {print $1, $2, $3, $4}' /proc/self/mounts | sort
}

# new_bundle DIR [ROOTFS]: a runc bundle running `df -k /dev/shm` on ROOTFS (default: the
# shared busybox rootfs, read-only), with no terminal and no network namespace changes.
new_bundle() {
  local dir=$1 rootfs=${2:-$IT_ROOTFS}
  mkdir -p "$dir"
  (cd "$dir" && runc spec) || it_die "runc spec failed"
  jq --arg root "$rootfs" '.root = {path: $root, readonly: true}
      | .process.terminal = false
      | .process.args = ["sh", "-c", "df -k /dev/shm | tail -n 1 | awk \"{print \\$2}\""]' \
    "$dir/config.json" >"$dir/config.json.new" && mv "$dir/config.json.new" "$dir/config.json"
}

# edit_bundle DIR JQ_FILTER [jq args...]: edits DIR/config.json in place.
edit_bundle() {
  local dir=$1 filter=$2
  shift 2
  jq "$@" "$filter" "$dir/config.json" >"$dir/config.json.new" && mv "$dir/config.json.new" "$dir/config.json" ||
    it_die "jq edit failed: $filter"
}

# add_env DIR NAME=VALUE...
add_env() {
  local dir=$1 kv
  shift
  for kv in "$@"; do edit_bundle "$dir" '.process.env += [$kv]' --arg kv "$kv"; done
}

# add_hook_entry DIR STAGE CONFIG
add_hook_entry() {
  edit_bundle "$1" '.hooks[$stage] = ((.hooks[$stage] // []) + [{path: $hook, args: ["gpu-run-hook", "--config", $cfg, $stage]}])' \
    --arg stage "$2" --arg hook "$HOOK" --arg cfg "$3"
}

# run_bundle DIR ID: runs the container; prints its stdout; stderr goes to DIR/stderr.
run_bundle() {
  local dir=$1 id=$2 rc
  (cd "$dir" && runc run "$id" </dev/null 2>"$dir/stderr")
  rc=$?
  runc delete -f "$id" >/dev/null 2>&1 || true
  return $rc
}
