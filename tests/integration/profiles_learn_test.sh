#!/usr/bin/env bash
# gpu-run-ctl profiles learn against real runs: a container of a private dockerd run under
# gpu-run --record with a profile whose plan is larger than what it uses writes one line to the
# performance log; `profiles learn` turns it into the profile's calibration, and `plan` for that
# shape is then at least the peak and below the unlearned plan. --guard writes its line too; a
# run that crashed teaches nothing; --print writes nothing.
# Usage: profiles_learn_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is taken from the same directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/wrapper_cases.sh"

it_require_root
it_require_cmd dockerd containerd runc docker jq
wrapper_find_binary "${1:-}"
CTL=$(dirname "$GPU_RUN")/gpu-run-ctl
[[ -x $CTL ]] || it_skip "gpu-run-ctl not found next to $GPU_RUN"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
wrapper_isolate_config "$work"
perf=$work/state/perf.jsonl
printf '{"log_file": "%s/gpu-run.log", "perf_log": "%s"}\n' "$work" "$perf" >"$work/config.json"
export GPU_RUN_CONFIG=$work/config.json
profiles=$work/profiles
mkdir -p "$profiles"
# The built-in default with a floor of 1 MiB, so the plan is the model's figure.
printf '{"name": "guess", "extends": "default", "min_shm": "1m"}\n' >"$profiles/guess.json"
shape=(--profile-dir "$profiles" --profile guess --workers 2 --batch-size 32 --gpu-request none)

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gr-busybox
it_docker_image "$IMAGE"

plan_of() { "$CTL" plan --json "${shape[@]}" | jq -r '.shm_bytes'; }
unlearned=$(plan_of)
it_log "unlearned plan: $unlearned bytes"

# --- a run that crashed teaches nothing ----------------------------------------------------------
assert_exit 3 "$GPU_RUN" --record "${shape[@]}" --rm "$IMAGE" \
  sh -c 'head -c 8388608 /dev/zero >/dev/shm/a; sleep 0.5; exit 3'
assert_exit 2 "$CTL" profiles learn guess --profile-dir "$profiles"
assert_contains "$IT_OUT" "not used (exit 3" "learn: the crashed run is listed as not used"
assert_contains "$IT_ERR" "no run to learn from" "learn: nothing to learn from a crashed run alone"

# --- a --record run that peaked at 20 MiB, below the plan -----------------------------------------
assert_exit 0 "$GPU_RUN" --record "${shape[@]}" --rm "$IMAGE" \
  sh -c 'head -c 20971520 /dev/zero >/dev/shm/a; sleep 1'
assert_eq 2 "$(wc -l <"$perf")" "the performance log holds one line a run"
peak=$(tail -n 1 "$perf" | jq -r '.peak_shm')
assert_eq "gpu-run --record 0 2 32" "$(tail -n 1 "$perf" | jq -r '"\(.source) \(.exit_status) \(.workers) \(.batch_size)"')" \
  "the line: its source, exit and shape"
[[ $peak -ge 20971520 && $peak -lt $unlearned ]] && it_pass "peak $peak: the run's 20 MiB, below the plan $unlearned" ||
  it_fail "peak [$peak] (plan $unlearned)"

before=$(sha256sum <"$profiles/guess.json")
assert_exit 0 "$CTL" profiles learn guess --profile-dir "$profiles" --print
assert_contains "$IT_OUT" "--print: would write $profiles/guess.json" "learn --print: says what it would write"
assert_eq "$before" "$(sha256sum <"$profiles/guess.json")" "learn --print: the profile is unchanged"

assert_exit 0 "$CTL" profiles learn guess --profile-dir "$profiles"
assert_contains "$IT_OUT" "wrote $profiles/guess.json" "learn: writes the profile"
assert_eq "$peak" "$(jq -r '.calibration.peak_shm' "$profiles/guess.json")" "learn: the calibration is the run's peak"
assert_eq "default 1m" "$(jq -r '"\(.extends) \(.min_shm)"' "$profiles/guess.json")" "learn: the file's own keys are kept"
learned=$(plan_of)
it_log "learned plan: $learned bytes (peak $peak, unlearned $unlearned)"
[[ $learned -ge $peak ]] && it_pass "learned plan $learned >= the peak $peak" || it_fail "learned plan $learned < peak $peak"
[[ $learned -lt $unlearned ]] && it_pass "learned plan $learned < the unlearned plan $unlearned" ||
  it_fail "learned plan $learned >= unlearned $unlearned"

# --- tight under a guard, wide without one (sizing.hpp, kUnguardedLearnedHeadroom) -----------------
# No node guard runs here: plan and the wrapper keep 1.55x the learned peak; --guard, whose guard
# grows /dev/shm for a run that peaks higher, starts the job at the tight plan (1.15-1.25x).
wrapper=$("$GPU_RUN" "${shape[@]}" --json "$IMAGE" | jq -r '.plan.shm_bytes')
tight=$("$GPU_RUN" --guard "${shape[@]}" --json "$IMAGE" | jq -r '.plan.shm_bytes')
assert_eq "$learned" "$wrapper" "no guard: the wrapper plans what plan does"
[[ $learned -ge $((peak * 155 / 100)) ]] && it_pass "no guard: the learned plan $learned keeps 1.55x the peak $peak" ||
  it_fail "no guard: the learned plan $learned is below 1.55x the peak $peak"
[[ $tight -ge $((peak * 115 / 100)) && $tight -le $((peak * 125 / 100 + 1048576)) && $tight -lt $learned ]] &&
  it_pass "--guard: the tight plan $tight, 1.15-1.25x the peak" || it_fail "--guard: plan [$tight] (peak $peak)"
assert_exit 0 "$CTL" plan "${shape[@]}"
assert_contains "$IT_OUT" "no guard runs here" "plan: says why the headroom is 1.55"

# --- the learned plan runs the job ----------------------------------------------------------------
assert_exit 0 "$GPU_RUN" "${shape[@]}" --rm "$IMAGE" sh -c 'head -c 20971520 /dev/zero >/dev/shm/a'

# --- --guard alone writes its line, with its growths ----------------------------------------------
assert_exit 0 "$GPU_RUN" --guard "${shape[@]}" --shm-size 8m --rm "$IMAGE" \
  sh -c 'for i in 1 2 3 4 5 6; do head -c 2097152 /dev/zero >/dev/shm/$i; sleep 0.3; done'
assert_eq "gpu-run --guard 0" "$(tail -n 1 "$perf" | jq -r '"\(.source) \(.exit_status)"')" "--guard: its line"
growths=$(tail -n 1 "$perf" | jq -r '.growths')
[[ $growths -ge 1 ]] && it_pass "--guard: its line counts $growths growths" || it_fail "--guard: growths [$growths]"

it_done
