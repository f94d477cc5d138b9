#!/usr/bin/env bash
# The README's first command, scripts/quickstart, on the binaries under test: its demo runs
# containers whose /dev/shm gpu-run sized, and prints no engine warning and nothing but the demo.
# Usage: quickstart_test.sh [PATH/TO/gpu-run]   (the binaries are taken from its directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
it_require_root
it_require_cmd dockerd containerd runc docker
bin=$(dirname "${1:-$GPU_RUN_BIN_DIR/gpu-run}")
root=$(cd "$here/../.." && pwd)
[[ $bin -ef $root/build/release/bin ]] || it_skip "quickstart demos build/release/bin; this build is $bin"

# No engine of the caller's: the quickstart starts its own private dockerd.
out=$(env -u DOCKER_HOST -u DOCKER_CONTEXT GPU_RUN_QUICKSTART_NO_SETUP=1 DOCKER_HOST=unix:///nonexistent.sock \
  "$root/scripts/quickstart" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/    /'
assert_eq 0 "$rc" "quickstart exits 0"
assert_contains "$out" "starting a private dockerd" "quickstart: a private dockerd when none runs"
assert_contains "$out" "64.0M" "quickstart: plain docker run shows Docker's 64 MiB"
# imagenet x2 on this 2-CPU machine (1 worker a rank, pin_memory but no GPU reaches the
# container, so hold 2, +1 without persistent_workers): per rank (2 x 1 + 3) x 36.8 MiB + 52 KiB
# = 183.8 MiB; 2 ranks + NCCL 36.8 MiB = 404.4 MiB; headroom 1.05: 425 MiB.
assert_eq 2 "$(grep -c '^shm  *425\.0M' <<<"$out")" "quickstart: gpu-run and gpu-run-runtime both give 425M"
assert_contains "$out" "action=spec-size" "quickstart: the runtime's log line"
assert_eq 0 "$(grep -ci 'warning' <<<"$out")" "quickstart: no warnings in the output"
assert_contains "$out" "quickstart: done" "quickstart: finishes"
it_done
