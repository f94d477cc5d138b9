#!/usr/bin/env bash
# Checks the test infrastructure itself: an isolated dockerd and an isolated podman store
# start, import the busybox image and run a container whose /dev/shm is the engine's default
# (Docker: 64 MiB; Podman 4.3: "65536k" read as decimal, 65536000 bytes = 64000 KiB).
set -u
source "$(dirname "$0")/lib.sh"

it_require_root
it_require_cmd dockerd podman

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
it_docker_image gr-busybox
out=$(docker run --rm gr-busybox df -k /dev/shm 2>&1 | it_drop_engine_warnings)
assert_eq 65536 "$(awk 'NR == 2 { print $2 }' <<<"$out")" "docker: default /dev/shm is 64 MiB"
out=$(docker run --rm --shm-size 300m gr-busybox df -k /dev/shm 2>&1 | it_drop_engine_warnings)
assert_eq 307200 "$(awk 'NR == 2 { print $2 }' <<<"$out")" "docker: --shm-size 300m gives 300 MiB"
assert_exit 7 docker run --rm gr-busybox sh -c 'exit 7'

had_lock=0
[[ -e /dev/shm/libpod_lock ]] && had_lock=1
p=$(it_tmpdir)
it_on_exit it_podman_cleanup "$p"
it_podman_env "$p"
it_podman_image gr-busybox
out=$(podman run --rm gr-busybox df -k /dev/shm 2>&1)
assert_eq 64000 "$(awk 'NR == 2 { print $2 }' <<<"$out")" "podman: default /dev/shm is 65536000 bytes"
out=$(podman run --rm --shm-size 300m gr-busybox df -k /dev/shm 2>&1)
assert_eq 307200 "$(awk 'NR == 2 { print $2 }' <<<"$out")" "podman: --shm-size 300m gives 300 MiB"
assert_exit 7 podman run --rm gr-busybox sh -c 'exit 7'
assert_eq 0 "$(it_podman_count)" "podman: --rm left no container"
[[ -d $p/tmp/locks ]]
assert_eq 0 $? "podman: the test store keeps its locks in files under its own directory"
if ((had_lock == 0)); then
  [[ ! -e /dev/shm/libpod_lock ]]
  assert_eq 0 $? "podman: no lock file created on the host's /dev/shm"
fi

it_done
