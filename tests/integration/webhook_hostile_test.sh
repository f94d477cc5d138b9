#!/usr/bin/env bash
# gpu-run-webhook under hostile connections, CI's size of bench/webhook/hostile: 300 TCP sockets
# that send nothing, 50 stopped mid-handshake, 100 kept-alive after one review, 10 clients that
# never read their answers, all held while 300 reviews go over TLS: every review answered with a
# p99 <= 50 ms, and once the sockets close the server's descriptors, threads and anonymous RSS
# are back where they were. (With a fixed pool of 64 threads, 64 idle sockets stalled every
# review for --io-timeout.) Runs alone: its latency target must not share the CPUs.
# Usage: webhook_hostile_test.sh [PATH/TO/gpu-run]   (gpu-run-webhook next to it, or in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd openssl
bin_dir=${GPU_RUN_BIN_DIR:-}
[[ -z $bin_dir && -n ${1:-} ]] && bin_dir=$(dirname "$1")
[[ -z $bin_dir ]] && bin_dir=$here/../../build/release/bin
[[ -x $bin_dir/gpu-run-webhook ]] || it_skip "gpu-run-webhook not found in $bin_dir (build it, or set GPU_RUN_BIN_DIR)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

if /usr/bin/python3 "$here/../../bench/webhook/hostile" --quick --bin-dir "$bin_dir"; then
  it_pass "the webhook served every review under hostile connections and gave back what they took"
else
  it_fail "bench/webhook/hostile --quick missed a target (above)"
fi
it_done
