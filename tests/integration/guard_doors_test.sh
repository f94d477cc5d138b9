#!/usr/bin/env bash
# The node guard grows each container to the ceiling the door that sized it recorded (its
# gpu-run.decision record, docs/ARCHITECTURE.md, "The decision record"): a container started by
# gpu-run (the record in a label), by gpu-run-runtime under a private dockerd (an annotation in the
# bundle's spec; no label, guarded all the same) and by gpu-run-hook under podman (the hook's
# state file under /run/gpu-run/decisions, removed once the container exits). Each writes 112 MiB
# into a /dev/shm planned below that and finishes, grown to exactly the recorded 128 MiB ceiling.
# The wrapper's profile is a user's (--profile-dir) the guard's store does not know: the recorded
# ceiling alone bounds it. A container sized before the record existed (only GPU_RUN_* and the
# gpu-run.profile label) is still guarded from its old keys, and one gpu-run did not size is said
# and left alone. While the node guard runs (it keeps /run/gpu-run/guard.alive write-locked), the
# wrapper, the runtime and a user's gpu-run-ctl plan plan a learned profile tight; once it has
# stopped, with the wide headroom.
# Usage: guard_doors_test.sh [PATH/TO/gpu-run]   (the other binaries next to it, or in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/oci_lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker podman conmon jq setpriv
CTL=$BIN_DIR/gpu-run-ctl
[[ -x $CTL && -x $HOOK && -x $RUNTIME && -x $GPU_RUN ]] || it_die "build gpu-run, gpu-run-ctl, -hook and -runtime first"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
hostlog=$work/gpu-run.log
mkdir -p "$work/profiles" "$work/user"
# 1 MiB a sample, a batch of 8 (8 MiB), 2 workers: a plan well below 112 MiB, max_shm 128 MiB.
profile() {
  printf '{"name": "%s", "extends": "default", "fields": [{"name": "x", "shape": [262144], "dtype": "float32"}],
    "batch_size": 8, "workers_per_gpu": 2, "min_shm": "32m", "max_shm": "128m"}\n' "$1" >"$2/$1.json"
}
profile doorjob "$work/profiles"
profile userjob "$work/user"
# A profile learned from one run (a calibration with its burst): tight (1.15x its 100 MiB peak) where a
# guard grows /dev/shm, 1.55x where none runs (sizing.hpp, kUnguardedLearnedHeadroom); both above
# Docker's 64 MiB, which the runtime does not shrink.
printf '{"name": "learned", "extends": "default", "min_shm": "1m", "calibration": {"peak_shm": "100m",
  "burst_shm": "1m", "workers": 2, "batch_size": 8, "gpus": 0, "prefetch_factor": 2, "pin_memory": false,
  "measured_at": "2026-12-07T00:00:00Z"}}\n' >"$work/profiles/learned.json"
it_isolate_config "$work" "{\"log_file\": \"$hostlog\", \"hook_path\": \"$HOOK\", \"runtimes\": [\"runc\"],
  \"profile_dirs\": [\"$work/profiles\"], \"guard\": {\"min_free_fraction\": 0.25, \"step_fraction\": 0.5}}"
plan_kib=$("$GPU_RUN" --profile doorjob --gpu-request none --json img | jq -r '.plan.shm_bytes / 1024 | floor')
((plan_kib < 114688)) || it_die "the plan ($plan_kib KiB) must be below the 112 MiB the job writes"
it_log "doorjob's plan: $plan_kib KiB"

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
printf '{"runtimes": {"gpu-run": {"path": "%s"}}}\n' "$RUNTIME" >"$d/daemon-in.json"
it_dockerd_start "$d" "$d/daemon-in.json"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

# 14 x 8 MiB into /dev/shm, one file every 0.3 s (after 3 s), then the file count and df.
# The same profile where a user who is not root reads it (the guard's lock is 0600; its sign,
# guard.alive, 0644).
pub=$(mktemp -d /tmp/gr-pub-XXXXXX) || it_die "mktemp failed"
it_on_exit rm -rf "$pub"
cp "$work/profiles/learned.json" "$pub/" && chmod 755 "$pub" && chmod 644 "$pub/learned.json"
# The learned plan as the wrapper and the runtime (what the container's df shows) give it, and
# gpu-run-ctl plan run as nobody, in MiB.
learned_plans() {
  local wrapped runtimed user
  wrapped=$("$GPU_RUN" --profile learned --workers 2 --batch-size 8 --gpu-request none --json img |
    jq -r '.plan.shm_bytes / 1048576 | floor')
  runtimed=$(docker run --rm --runtime gpu-run -e GPU_RUN_PROFILE=learned -e GPU_RUN_WORKERS=2 -e GPU_RUN_BATCH_SIZE=8 \
    "$IMAGE" df -k /dev/shm | awk '$NF == "/dev/shm" { print int($2 / 1024) }')
  user=$(setpriv --reuid nobody --regid nogroup --clear-groups env -i PATH=/usr/bin:/bin "$CTL" plan --profile-dir "$pub" \
    --profile learned --workers 2 --batch-size 8 --gpus 0 --json | jq -r '.shm_bytes / 1048576 | floor')
  echo "$wrapped $runtimed $user"
}
FILL='sleep 3; i=0; while [ $i -lt 14 ]; do head -c 8388608 /dev/zero >/dev/shm/f$i || exit 1;
  i=$((i+1)); sleep 0.3; done; sleep 1; ls /dev/shm | wc -l; df -k /dev/shm'

it_guard_setup "$CTL" "$work"
note_of() { grep -F "guard: guarding container $1 (" "$work/guard.err" | head -n 1; }
# ENGINE NAME CEILING: the job's exit code, its file count and its last df (KiB) checked.
check_job() {
  local engine=$1 name=$2 ceiling=$3 kb
  assert_eq 0 "$("$engine" wait "$name")" "$name: wrote 112 MiB into a /dev/shm planned at $plan_kib KiB (exit 0)"
  assert_eq 14 "$("$engine" logs "$name" 2>/dev/null | head -n 1)" "$name: all 14 files are there"
  kb=$("$engine" logs "$name" 2>/dev/null | awk '$NF == "/dev/shm" { print $2 }')
  assert_eq 131072 "$kb" "$name: grown to exactly $ceiling, 128 MiB"
}

# ------------------------------------------------------------ docker: wrapper, runtime, old keys
it_guard_start --engine docker
it_guard_wait_for "watching docker's containers as they start (" "docker: dockerd's container directories watched"
read -r tight tight_runtimed tight_user <<<"$(learned_plans)"
assert_eq "$tight" "$tight_runtimed" "the node guard runs: the runtime sizes the learned plan as the wrapper plans it"
assert_eq "$tight" "$tight_user" "the node guard runs: a user who is not root sees it too (guard.alive), the same plan"
assert_eq 644 "$(stat -c %a /run/gpu-run/guard.alive)" "the guard's sign, /run/gpu-run/guard.alive, is 0644"
((tight >= 115 && tight <= 116)) && it_pass "the node guard runs (it holds its lock): the learned plan is tight, $tight MiB" ||
  it_fail "the node guard runs: the learned plan [$tight] MiB, not 1.15 x 100 MiB"
"$GPU_RUN" --engine docker --gpu-request none --profile-dir "$work/user" --profile userjob -d --name wrapped \
  "$IMAGE" sh -c "$FILL" >/dev/null || it_die "gpu-run -d wrapped failed"
docker run -d --name runtimed --runtime gpu-run -e GPU_RUN_PROFILE=doorjob -e GPU_RUN_WORKERS=2 \
  -e GPU_RUN_BATCH_SIZE=8 "$IMAGE" sh -c "$FILL" >/dev/null || it_die "docker run --runtime gpu-run failed"
docker run -d --name old --shm-size 64m --label gpu-run.profile=doorjob -e GPU_RUN_PROFILE=doorjob \
  -e GPU_RUN_NUM_WORKERS=2 -e GPU_RUN_BATCH_SIZE=8 "$IMAGE" sh -c "$FILL" >/dev/null || it_die "docker run old failed"
docker run -d --name plain --shm-size 64m "$IMAGE" sleep 30 >/dev/null || it_die "docker run plain failed"
for name in wrapped runtimed old; do it_guard_wait_for "guard: guarding container $name (" "$name: picked up"; done
it_guard_wait_for "not guarding container plain (" "plain: said"

note=$(note_of wrapped)
assert_contains "$note" "recorded by gpu-run in its label: profile userjob, 2 workers x a batch of 8" \
  "wrapped: the guard reads the wrapper's record"
assert_contains "$note" "grows up to 128MiB" "wrapped: up to the recorded ceiling"
assert_contains "$note" "its profile is not in this host's store" "wrapped: a user's profile: the record alone bounds it"
note=$(note_of runtimed)
assert_contains "$note" "recorded by gpu-run-runtime in its annotation: profile doorjob" \
  "runtimed: the runtime's record, from the bundle's spec (no label)"
assert_contains "$note" "grows up to 128MiB" "runtimed: up to the recorded ceiling"
assert_eq "" "$(docker inspect -f '{{index .Config.Labels "gpu-run.decision"}}' runtimed)" \
  "runtimed: no label: the record is in the spec only"
# Doctor reads the same record, through the same read_recorded, from the task's bundle.
doctored=$("$CTL" doctor runtimed 2>&1) || true
assert_contains "$doctored" "gpu-run-runtime recorded (its annotation)" \
  "runtimed: doctor shows the runtime's record from the spec"
assert_contains "$doctored" "profile doorjob, 2 workers x a batch of 8, the guard may grow it to 128MiB" \
  "runtimed: doctor shows the record's request and ceiling"
note=$(note_of old)
assert_contains "$note" "keeps 16MiB free (profile doorjob, 2 workers x a batch of 8)" \
  "old: sized before the record: planned from GPU_RUN_* as before"
assert_contains "$(grep -F "not guarding container plain (" "$work/guard.err")" "gpu-run did not size it" \
  "plain: the one admission rule says why"
check_job docker wrapped "the recorded ceiling (the guard's store knows no userjob)"
check_job docker runtimed "the recorded ceiling"
check_job docker old "its profile's max_shm, re-planned from its old keys"
assert_contains "$(cat "$work/guard.err")" "the ceiling recorded when it was sized 128MiB" \
  "a growth capped by the recorded ceiling says so"
it_guard_stop "docker"
docker rm -f wrapped runtimed old plain >/dev/null 2>&1
read -r wide wide_runtimed wide_user <<<"$(learned_plans)"
assert_eq "$wide" "$wide_runtimed" "no node guard: the runtime sizes the learned plan as the wrapper plans it"
assert_eq "$wide" "$wide_user" "no node guard: a user who is not root plans it as wide"
[[ ! -e /run/gpu-run/guard.alive ]] && it_pass "the stopped guard removed its sign" || it_fail "guard.alive is left behind"
((wide >= 155 && wide <= 156)) && it_pass "the node guard stopped: the learned plan keeps 1.55 x 100 MiB, $wide MiB" ||
  it_fail "the node guard stopped: the learned plan [$wide] MiB, not 1.55 x 100 MiB"

# ------------------------------------------------------------ podman: the hook's state file
hooks=$work/hooks.d
mkdir -p "$hooks"
"$CTL" configure podman --no-guard --hooks-dir "$hooks" --config "$GPU_RUN_CONFIG" >/dev/null || it_die "configure podman failed"
p=$(it_tmpdir)
it_on_exit it_podman_cleanup "$p"
it_podman_env "$p"
it_podman_image "$IMAGE"
it_guard_start --engine podman
it_guard_wait_for "watching podman's containers as they start (" "podman: its run root watched"
podman --hooks-dir "$hooks" run -d --name hooked --annotation gpu-run.profile=doorjob --annotation gpu-run.workers=2 \
  --annotation gpu-run.batch-size=8 "$IMAGE" sh -c "$FILL" >/dev/null || it_die "podman run hooked failed"
id=$(podman inspect -f '{{.Id}}' hooked)
assert_eq "gpu-run-hook" "$(jq -r .door "/run/gpu-run/decisions/$id.json")" "hooked: the hook's state file, keyed by its id"
it_guard_wait_for "guard: guarding container hooked (" "hooked: picked up"
note=$(note_of hooked)
assert_contains "$note" "recorded by gpu-run-hook in its hook state file: profile doorjob, 2 workers x a batch of 8" \
  "hooked: the guard reads the hook's record"
assert_contains "$note" "grows up to 128MiB" "hooked: up to the recorded ceiling"
check_job podman hooked "the recorded ceiling"
it_guard_wait_for "stopped guarding container hooked (" "hooked: no longer guarded once it exited"
[[ ! -e /run/gpu-run/decisions/$id.json ]] && it_pass "hooked: its state file removed once it exited" ||
  it_fail "hooked: /run/gpu-run/decisions/$id.json left behind"
it_guard_stop "podman"
podman rm -f hooked >/dev/null 2>&1
it_done
