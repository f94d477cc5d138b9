#!/usr/bin/env bash
# gpu-run as a `docker run` wrapper, against a private dockerd started for this test.
# Usage: wrapper_docker_test.sh [PATH/TO/gpu-run]
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/wrapper_cases.sh"

it_require_root
it_require_cmd dockerd containerd runc docker jq
wrapper_find_binary "${1:-}"
it_log "testing $GPU_RUN"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
wrapper_isolate_config "$work"

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
ENGINE=docker
IMAGE=gr-busybox
it_docker_image "$IMAGE"

wrapper_run_cases "$work"
it_done
