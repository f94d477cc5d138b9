#!/usr/bin/env bash
# gpu-run --engine podman, against a podman store private to this test (runc, cgroupfs).
# Usage: wrapper_podman_test.sh [PATH/TO/gpu-run]
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/wrapper_cases.sh"

it_require_root
it_require_cmd podman runc conmon jq
wrapper_find_binary "${1:-}"
it_log "testing $GPU_RUN"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
wrapper_isolate_config "$work"

p=$(it_tmpdir)
it_on_exit it_podman_cleanup "$p"
it_podman_env "$p"
ENGINE=podman
IMAGE=gr-busybox
it_podman_image "$IMAGE"

wrapper_run_cases "$work"
it_done
