#!/usr/bin/env bash
# gpu-run-ctl guard while its world changes, CI's size of bench/guard/soak: 60 containers started
# and removed under it (four at a time) while /metrics is scraped every 50 ms (no warning, no
# failed scrape, no series left, descriptors, threads and memory flat); dockerd restarted and then
# containerd restarted, each followed by a container that writes 96 MiB into 64 MiB and must
# finish; the guard restarted 5 times (SIGTERM to exit, and to guarding the container again,
# within 100 ms) and once while a container writes; a second guard refused. Runs alone.
# Usage: guard_soak_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl next to it, or in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker curl python3
it_binaries "${1:-}" gpu-run-ctl
if bash "$here/../../bench/guard/soak" --quick --build-dir "$(dirname "$IT_BIN")"; then
  it_pass "the guard kept guarding through churn, engine restarts and its own restarts"
else
  it_fail "bench/guard/soak --quick missed a target (above)"
fi
it_done
