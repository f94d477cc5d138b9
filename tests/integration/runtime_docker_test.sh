#!/usr/bin/env bash
# gpu-run-runtime registered in an isolated dockerd's daemon.json: plain `docker run
# --runtime gpu-run` gets its /dev/shm sized with --ipc private, shareable, none, and is
# left alone with --ipc host. Then 20 containers in parallel.
set -u
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/oci_lib.sh"
it_require_root
it_require_cmd jq

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
export GPU_RUN_CONFIG=$d/gpu-run.json
log=$d/gpu-run.log
printf '{"log_file": "%s", "hook_path": "%s", "runtimes": ["runc"]}\n' "$log" "$HOOK" >"$GPU_RUN_CONFIG"
printf '{"runtimes": {"gpu-run": {"path": "%s"}}}\n' "$RUNTIME" >"$d/daemon-in.json"
it_dockerd_start "$d" "$d/daemon-in.json"
it_docker_image gpurun-busybox

expected=$(expected_kib imagenet 2)
shm_kib() { docker run --rm --runtime gpu-run "$@" gpurun-busybox sh -c 'df -k /dev/shm | tail -n 1' | awk '{print $2}'; }
req=(-e GPU_RUN_PROFILE=imagenet -e GPU_RUN_GPUS=2)

assert_eq "$expected" "$(shm_kib "${req[@]}")" "--ipc private (default): the spec's tmpfs size= is rewritten"
assert_contains "$(tail -n 1 "$log")" "action=spec-size" "private: the runtime rewrote config.json"
hook_lines=$(grep -c 'gpu-run-hook' "$log")
assert_eq "$expected" "$(shm_kib --ipc shareable "${req[@]}")" "--ipc shareable: the bind-mounted tmpfs is resized"
assert_contains "$(tail -n 1 "$log")" "action=resized" "shareable: the runtime resized Docker's mounts/shm"
assert_contains "$(tail -n 1 "$log")" "where=host" "shareable: on the host, where dockerd mounted it"
assert_eq "$hook_lines" "$(grep -c 'gpu-run-hook' "$log")" "shareable: no hook ran"
assert_eq "$expected" "$(shm_kib --ipc none "${req[@]}")" "--ipc none: the hook mounts a new tmpfs"
assert_contains "$(grep 'gpu-run-hook' "$log" | tail -n 1)" "action=mounted" "none: the hook mounted a tmpfs"
assert_eq "1777" "$(docker run --rm --runtime gpu-run --ipc none "${req[@]}" gpurun-busybox stat -c %a /dev/shm)" "--ipc none: the new /dev/shm has mode 1777"

host_before=$(df -k /dev/shm | tail -n 1 | awk '{print $2}')
assert_eq "$host_before" "$(shm_kib --ipc host "${req[@]}")" "--ipc host: the container sees the host's /dev/shm"
assert_eq "$host_before" "$(df -k /dev/shm | tail -n 1 | awk '{print $2}')" "--ipc host: the host's /dev/shm size is unchanged"
assert_contains "$(tail -n 1 "$log")" "no ipc namespace" "--ipc host: the log says why it was left alone"

assert_eq 65536 "$(shm_kib)" "a container that asks nothing keeps Docker's 64 MiB"

# An explicit request that cannot be met fails `docker run` with the runtime's line.
out=$(docker run --rm --runtime gpu-run -e GPU_RUN_PROFILE=imagenett gpurun-busybox true 2>&1)
rc=$?
((rc != 0)) && it_pass "unknown profile: docker run fails (exit $rc)" || it_fail "unknown profile: docker run succeeded"
assert_contains "$out" "unknown profile 'imagenett'" "docker shows gpu-run's message"

# One name per fact (issue 40): GPU_RUN_NUM_WORKERS=8 planned the default workers; it is read as
# GPU_RUN_WORKERS=8, the size gpu-run --workers 8 plans, and the two with two values fail the start.
w8=$(expected_kib imagenet 2 --workers 8)
assert_eq "$w8" "$(shm_kib "${req[@]}" -e GPU_RUN_WORKERS=8)" "GPU_RUN_WORKERS=8: the size of gpu-run --workers 8"
assert_eq "$w8" "$(shm_kib "${req[@]}" -e GPU_RUN_NUM_WORKERS=8)" "GPU_RUN_NUM_WORKERS=8: the same size"
[[ $w8 != "$expected" ]] && it_pass "8 workers plan another size than the default's" || it_fail "8 workers planned as the default"
out=$(docker run --rm --runtime gpu-run "${req[@]}" -e GPU_RUN_WORKERS=4 -e GPU_RUN_NUM_WORKERS=8 gpurun-busybox true 2>&1)
rc=$?
((rc != 0)) && it_pass "two workers values: docker run fails (exit $rc)" || it_fail "two workers values: docker run succeeded"
assert_contains "$out" "GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values" "docker shows the line naming both"

# The command line (the spec's process.args, a shell's string too): the warning in the host log
# (and the flag in the decision record: runtime_test).
got=$(docker run --rm --runtime gpu-run "${req[@]}" gpurun-busybox sh -c 'echo train.py -j 8 >/dev/null; df -k /dev/shm | tail -n 1' | awk '{print $2}')
assert_eq "$expected" "$got" "a command line of other workers keeps the plan"
warn=$(grep 'action=warn warning=' "$log" | tail -n 1)
assert_contains "$warn" "the command line's '-j 8' asks for 8 DataLoader workers" "the runtime logs the command line's workers"
assert_contains "$warn" "set GPU_RUN_WORKERS=8" "in the container's words"

# Runtime pass-through keeps every other subcommand working: exec, kill, stop.
cid=$(docker run -d --runtime gpu-run "${req[@]}" gpurun-busybox sleep 300)
assert_eq "$expected" "$(docker exec "$cid" df -k /dev/shm | tail -n 1 | awk '{print $2}')" "docker exec in a gpu-run container"
docker rm -f "$cid" >/dev/null
assert_eq 0 $? "docker rm -f through the runtime"

# Load: 20 containers in parallel, each with its own explicit size.
lines_before=$(wc -l <"$log")
pids=()
for i in $(seq 1 20); do
  (
    size=$((100 + i))
    got=$(docker run --rm --runtime gpu-run -e GPU_RUN_SHM_SIZE=${size}m gpurun-busybox sh -c 'df -k /dev/shm | tail -n 1' | awk '{print $2}')
    [[ $got == $((size * 1024)) ]] || { echo "container $i: expected $((size * 1024)) got '$got'" >&2; exit 1; }
  ) &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
assert_eq 0 "$failed" "20 parallel containers all got their sizes"
new_lines=$(tail -n +"$((lines_before + 1))" "$log")
assert_eq 20 "$(grep -c 'action=spec-size source=env size=1[0-2][0-9]m reason=' <<<"$new_lines")" "the log holds 20 whole decision lines"
assert_eq 0 "$(grep -cv '^[0-9T:Z-]* gpu-run-[a-z]*\[[0-9]*\] level=[a-z]* ' <<<"$new_lines")" "no torn or interleaved log lines"
it_done
