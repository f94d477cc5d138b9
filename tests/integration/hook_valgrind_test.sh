#!/usr/bin/env bash
# gpu-run-hook runs clean under valgrind (memcheck, leaks included) as a real createRuntime
# hook under runc: the remount path, the explicit-size path, and a refused request.
set -u
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/oci_lib.sh"
it_require_root
it_require_cmd runc jq valgrind

# The installed hook is a static PIE, whose heap memcheck cannot see; the build's
# dynamically linked twin runs the same code.
HOOK=$BIN_DIR/gpu-run-hook-memcheck
[[ -x $HOOK ]] || it_die "$HOOK is not built (it is built with the tests)"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_rootfs
cfg=$work/config.json
printf '{"log_file": "%s/gpu-run.log"}\n' "$work" >"$cfg"

# valgrind_bundle NAME: a bundle whose createRuntime hook is the hook under memcheck.
valgrind_bundle() {
  local b=$work/$1
  new_bundle "$b"
  edit_bundle "$b" '.hooks.createRuntime = [{path: $vg, args: ["valgrind", "--error-exitcode=99", "--leak-check=full",
      "--errors-for-leak-kinds=definite,indirect", "--log-file=" + $log, $hook, "--config", $cfg, "createRuntime"]}]' \
    --arg vg "$(command -v valgrind)" --arg hook "$HOOK" --arg cfg "$cfg" --arg log "$b/valgrind.log"
  printf '%s\n' "$b"
}

b=$(valgrind_bundle plan)
add_env "$b" GPU_RUN_PROFILE=imagenet GPU_RUN_GPUS=2
assert_eq "$(expected_kib imagenet 2)" "$(run_bundle "$b" "vg-plan-$$")" "under valgrind: the planned size applies"
assert_contains "$(cat "$b/valgrind.log")" "ERROR SUMMARY: 0 errors" "remount path: no memcheck errors"
assert_contains "$(cat "$b/valgrind.log")" "definitely lost: 0 bytes" "remount path: no leaks"
allocs=$(sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' "$b/valgrind.log" | tr -d ,)
if [[ ${allocs:-0} -gt 100 ]]; then
  it_pass "memcheck tracked the hook's heap ($allocs allocations)"
else
  it_fail "memcheck saw ${allocs:-no} heap allocations: it is not tracking the hook's heap"
fi

b=$(valgrind_bundle explicit)
edit_bundle "$b" '.annotations["gpu-run.shm-size"] = "300m"'
assert_eq 307200 "$(run_bundle "$b" "vg-explicit-$$")" "under valgrind: an explicit size applies"
assert_contains "$(cat "$b/valgrind.log")" "ERROR SUMMARY: 0 errors" "explicit path: no memcheck errors"

b=$(valgrind_bundle refused)
add_env "$b" GPU_RUN_PROFILE=imagenett
run_bundle "$b" "vg-refused-$$" >/dev/null
assert_eq 1 $? "under valgrind: an unknown profile still fails the start"
assert_contains "$(cat "$b/stderr")" "unknown profile" "the hook's message, not valgrind's exit code 99"
assert_contains "$(cat "$b/valgrind.log")" "ERROR SUMMARY: 0 errors" "error path: no memcheck errors"
it_done
