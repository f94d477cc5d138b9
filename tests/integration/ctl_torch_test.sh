#!/usr/bin/env bash
# gpu-run-ctl watch, calibrate and tune, and gpu-run --record, against a real PyTorch
# DataLoader (torch_workload.py) in containers of a private dockerd. The image is Debian's
# python3-torch rootfs from scripts/torch-rootfs (built once, cached in /var/cache/gpu-run).
# Usage: ctl_torch_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is taken from the same directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/wrapper_cases.sh"

it_require_root
it_require_cmd dockerd containerd runc docker jq rsvg-convert
wrapper_find_binary "${1:-}"
CTL=$(dirname "$GPU_RUN")/gpu-run-ctl
[[ -x $CTL ]] || it_skip "gpu-run-ctl not found next to $GPU_RUN"
it_log "testing $GPU_RUN and $CTL"

it_torch_tarball
tarball=$IT_TORCH_TARBALL

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
wrapper_isolate_config "$work"
export XDG_STATE_HOME=$work/state
unset LANG LC_ALL LC_CTYPE || true

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
it_dockerd_start "$d"
IMAGE=gpurun-torch
t0=$SECONDS
docker import "$tarball" "$IMAGE" >/dev/null || it_die "docker import $tarball failed"
it_log "imported $IMAGE in $((SECONDS - t0))s"

# The workload: 96 x 3x224x224 float32 images a batch (55 MiB), 2 workers, prefetch 2.
WL_MOUNT=(-v "$here:/t:ro")
WL=(/usr/bin/python3 /t/torch_workload.py)
BIG=(--batch 96 --shape 3x224x224 --batches 8 --delay 0.2)
MiB=$((1 << 20))

# --- the workload itself fails at Docker's 64 MiB with PyTorch's message ---------------------
assert_exit 1 docker run --rm "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${BIG[@]}" --workers 2
assert_contains "$IT_ERR" "DataLoader worker" "64 MiB /dev/shm: PyTorch's own message"

# --- watch -----------------------------------------------------------------------------------
docker run -d --name wl --shm-size 1g "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${BIG[@]}" --workers 2 >/dev/null ||
  it_die "docker run -d failed"
"$CTL" watch --timeline "$work/watch.svg" wl >"$work/watch.out" 2>"$work/watch.err" &
watch_pid=$!
wait "$watch_pid"
assert_eq 0 "$?" "watch exits 0 when the container exits"
assert_eq 0 "$(docker wait wl)" "the watched workload ran to the end"
docker rm wl >/dev/null
if jq -e . "$work/watch.out" >/dev/null 2>&1; then it_pass "watch: every line is JSON"; else it_fail "watch: output is not JSON lines: $(head -c 300 "$work/watch.out")"; fi
samples=$(jq -s '[.[] | select(.event == "sample")] | length' "$work/watch.out")
summary=$(tail -n 1 "$work/watch.out")
w_peak=$(jq -r 'select(.event == "summary") | .peak' <<<"$summary")
w_rate=$(jq -r 'select(.event == "summary") | .rate_hz' <<<"$summary")
it_log "watch: $samples samples, peak $w_peak bytes, $w_rate Hz"
assert_eq true "$(jq -r '.exited' <<<"$summary")" "watch: summary line says the container exited"
assert_eq "$samples" "$(jq -r '.samples' <<<"$summary")" "watch: summary counts the sample lines"
[[ $samples -ge 100 ]] && it_pass "watch: $samples samples" || it_fail "watch: only $samples samples"
[[ ${w_rate%.*} -ge 50 ]] && it_pass "watch: $w_rate samples a second" || it_fail "watch: $w_rate samples a second"
# At least 3 of the 55 MiB batches are in flight at once with 2 workers x prefetch 2.
[[ $w_peak -gt $((3 * 55 * MiB)) ]] && it_pass "watch: peak $((w_peak / MiB)) MiB" ||
  it_fail "watch: peak $w_peak bytes, expected more than 3 batches"
assert_eq 1073741824 "$(jq -r '.size' <<<"$summary")" "watch: size is the container's 1g /dev/shm"
# The timeline: an SVG that renders, with the peak watch measured marked on it.
assert_contains "$(cat "$work/watch.err")" "timeline of /dev/shm in $work/watch.svg" "watch --timeline: says where"
svg_peak=$(grep -o 'peak [0-9.]*MiB at' "$work/watch.svg" | grep -o '[0-9.]*')
awk -v s="$svg_peak" -v p="$w_peak" 'BEGIN { d = s * 1048576 - p; exit !(d < 1048576 && d > -1048576) }' &&
  it_pass "watch --timeline: the peak marked ($svg_peak MiB) is the peak watch measured" ||
  it_fail "watch --timeline: marked [$svg_peak] MiB, watch measured $w_peak bytes"
assert_exit 0 rsvg-convert -o "$work/watch.png" "$work/watch.svg"
[[ $(stat -c %s "$work/watch.png") -gt 5000 ]] && it_pass "watch --timeline: rsvg-convert renders it" ||
  it_fail "watch --timeline: the PNG is only $(stat -c %s "$work/watch.png") bytes"
assert_exit 2 "$CTL" watch no-such-container
assert_contains "$IT_ERR" "no-such-container" "watch: an unknown container is named"
assert_exit 2 "$CTL" watch --interval 0 x
assert_contains "$IT_ERR" "--interval" "watch: --interval 0 names the flag"
assert_exit 2 "$CTL" watch --interval abc x
assert_contains "$IT_ERR" "--interval" "watch: --interval abc names the flag"
assert_exit 2 "$CTL" watch --engine lxc x
assert_contains "$IT_ERR" "--engine" "watch: --engine lxc names the flag"

# --- gpu-run --record -------------------------------------------------------------------------
log=$XDG_STATE_HOME/gpu-run/perf.jsonl
GR=("$GPU_RUN" --gpu-request none --workers 2 --batch-size 96)
planned=$("${GR[@]}" --json --rm "$IMAGE" true | jq -r '.plan.shm_bytes')
assert_exit 0 "${GR[@]}" --record --timeline "$work/record.svg" --rm "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${BIG[@]}" --workers 2
assert_contains "$IT_OUT" "torch_workload: 8 batches" "record: the workload's stdout is the caller's"
assert_contains "$IT_ERR" "timeline of /dev/shm in $work/record.svg" "record --timeline: says where"
assert_contains "$IT_ERR" "recorded peak /dev/shm" "record: says what it recorded"
assert_eq 1 "$(wc -l <"$log")" "record: one line appended to $log"
rec=$(tail -n 1 "$log")
r_peak=$(jq -r '.peak_shm' <<<"$rec")
it_log "record: $rec"
[[ $r_peak -gt $((3 * 55 * MiB)) ]] && it_pass "record: peak $((r_peak / MiB)) MiB" || it_fail "record: peak $r_peak"
assert_eq 0 "$(jq -r '.exit_status' <<<"$rec")" "record: exit status 0"
assert_eq "$planned" "$(jq -r '.planned_shm' <<<"$rec")" "record: planned size is gpu-run's plan"
assert_eq "$planned" "$(jq -r '.shm_size' <<<"$rec")" "record: the container's /dev/shm had the planned size"
assert_exit 0 rsvg-convert -o "$work/record.png" "$work/record.svg"
assert_contains "$(cat "$work/record.svg")" "/dev/shm of $IMAGE (profile default, exit 0)" "record --timeline: titled"
assert_exit 2 "${GR[@]}" --timeline "$work/x.svg" --rm "$IMAGE" true
assert_contains "$IT_ERR" "add --record" "--timeline without --record says what to add"
assert_eq "gpurun-torch|default|0|2|96" "$(jq -r '[.image, .profile, .gpus, .workers, .batch_size] | map(tostring) | join("|")' <<<"$rec")" \
  "record: image, profile, gpus, workers, batch"
[[ $r_peak -le $planned ]] && it_pass "record: peak within the plan" || it_fail "record: peak $r_peak above plan $planned"
assert_exit 3 "${GR[@]}" --record --rm "$IMAGE" /usr/bin/python3 -c 'import sys, time; time.sleep(0.5); sys.exit(3)'
assert_eq 2 "$(wc -l <"$log")" "record: a failing job is recorded too"
assert_eq 3 "$(tail -n 1 "$log" | jq -r '.exit_status')" "record: its exit status"
assert_exit 2 "${GR[@]}" --record -d "$IMAGE" true
assert_contains "$IT_ERR" "--record" "record: -d is refused naming --record"
assert_eq 2 "$(wc -l <"$log")" "record: nothing recorded for a refused run"

# --- calibrate --------------------------------------------------------------------------------
prof=$work/profiles
assert_exit 0 "$CTL" calibrate --out-profile team/torch-test --out-dir "$prof" --workers 2 --batch-size 96 \
  --gpu-request none -- "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${BIG[@]}" --workers 2
printf '%s\n' "$IT_OUT" | sed 's/^/    /'
assert_contains "$IT_OUT" "measured peak /dev/shm" "calibrate: prints the measured peak"
assert_contains "$IT_OUT" "calibrated plan" "calibrate: prints the new plan"
assert_contains "$IT_ERR" "(generous)" "calibrate: ran with generous shm"
file=$prof/team/torch-test.json
assert_exit 0 "$CTL" profiles validate "$prof"
c_peak=$(jq -r '.calibration.peak_shm' "$file")
assert_eq "2|96|0|2" "$(jq -r '.calibration | [.workers, .batch_size, .gpus, .prefetch_factor] | map(tostring) | join("|")' "$file")" \
  "calibrate: the conditions are in the profile"
assert_eq default "$(jq -r '.extends' "$file")" "calibrate: extends the base profile"
c_plan=$("$CTL" plan --profile-dir "$prof" --profile team/torch-test --json | jq -r '.shm_bytes')
ratio=$(awk -v p="$c_plan" -v m="$c_peak" 'BEGIN { printf "%.3f", p / m }')
it_log "calibrate: peak $c_peak, plan $c_plan, ratio $ratio"
awk -v r="$ratio" 'BEGIN { exit !(r >= 1.0 && r <= 1.5) }' && it_pass "calibrate: plan/peak = $ratio, in [1, 1.5]" ||
  it_fail "calibrate: plan/peak = $ratio (plan $c_plan, peak $c_peak)"
assert_exit 0 "$GPU_RUN" --gpu-request none --profile-dir "$prof" --profile team/torch-test --rm "${WL_MOUNT[@]}" \
  "$IMAGE" "${WL[@]}" "${BIG[@]}"
assert_contains "$IT_OUT" "8 batches of 96x3x224x224 with 2 workers" "calibrated profile runs the workload to the end"

# --- calibrate: NCCL's segments are measured apart from the DataLoader ------------------------
# Segments made as NCCL's SHM transport makes them (torch_workload.py --nccl-segments: two of
# 128 MiB and one of NCCL's default 9,637,888 bytes), unlinked and mapped by the job and by its
# forked workers. With --gpus 2, calibrate must measure them exactly, once each, write them as
# nccl.measured for 2 ranks, and keep them out of the DataLoader's peak (as big as the segments:
# counting them there would double it).
seg=$((128 * MiB))
nccl_bytes=$((2 * seg + 9637888))
batch_bytes=$((96 * 3 * 224 * 224 * 4 + 4096))
assert_exit 0 "$CTL" calibrate --out-profile team/torch-nccl --out-dir "$prof" --workers 2 --batch-size 96 --gpus 2 \
  --gpu-request none -- "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${BIG[@]}" --workers 2 --nccl-segments "$seg,$seg,9637888"
printf '%s\n' "$IT_OUT" | sed 's/^/    /'
assert_contains "$IT_OUT" "NCCL's segments (/dev/shm/nccl-*): 265.2MiB in 3" "calibrate: NCCL's segments seen, each once"
assert_contains "$IT_OUT" "nccl.measured for 2 ranks" "calibrate: says where the figure goes"
file=$prof/team/torch-nccl.json
assert_exit 0 "$CTL" profiles validate "$prof"
assert_eq 2 "$(jq -r '.nccl.measured_ranks' "$file")" "calibrate: nccl.measured_ranks is the run's ranks"
n_peak=$(jq -r '.calibration.peak_shm' "$file")
it_log "calibrate with NCCL segments: DataLoader peak $n_peak (without: $c_peak), batch $batch_bytes"
[[ $n_peak -ge $((c_peak - batch_bytes)) && $n_peak -le $((c_peak + batch_bytes)) ]] &&
  it_pass "calibrate: the DataLoader's peak leaves NCCL's segments out ($n_peak, $c_peak without them)" ||
  it_fail "calibrate: DataLoader peak $n_peak, not within a batch of $c_peak (NCCL's segments are $nccl_bytes)"
assert_eq "measured|$nccl_bytes" \
  "$("$CTL" plan --profile-dir "$prof" --profile team/torch-nccl --gpus 2 --json | jq -r '"\(.nccl.source)|\(.nccl_bytes)"')" \
  "plan: 2 ranks get the measured NCCL term, to the byte"
assert_eq "$((4 * nccl_bytes))" \
  "$("$CTL" plan --profile-dir "$prof" --profile team/torch-nccl --gpus 4 --json | jq -r '.nccl_bytes')" \
  "plan: 4 ranks scale it by connections (4 x 2 against 2 x 1)"
assert_exit 0 "$CTL" plan --profile-dir "$prof" --profile team/torch-nccl --gpus 4
assert_contains "$IT_OUT" "measured with 2 ranks, the profile's nccl.measured, scaled to 4 ranks" "plan: says where the term came from"

assert_exit 2 "$CTL" calibrate --out-profile team/torch-test --out-dir "$prof" -- "$IMAGE" true
assert_contains "$IT_ERR" "--force" "calibrate: refuses to overwrite without --force"
assert_exit 2 "$CTL" calibrate --out-profile ../x --out-dir "$prof" -- "$IMAGE" true
assert_contains "$IT_ERR" "--out-profile" "calibrate: a bad name names --out-profile"
assert_exit 2 "$CTL" calibrate --out-profile z --out-dir "$prof" --workers 0 -- "$IMAGE" true
assert_contains "$IT_ERR" "--workers" "calibrate: --workers 0 names the flag"
assert_exit 2 "$CTL" calibrate --out-profile z --out-dir "$prof"
assert_contains "$IT_ERR" "IMAGE" "calibrate: a missing image is named"

# --- tune -------------------------------------------------------------------------------------
SMALL=(--batch 32 --shape 3x64x64 --batches 10 --delay 0.02 --work-ms 4 --workers '{workers}')
# Two counts each for the table and the JSON (0 and 2, then 1 and 2): the same table over three
# counts is docs/reference.md's shown run, which docs_runs runs and compares with the page.
assert_exit 0 "$CTL" tune --batch-size 32 --gpu-request none --counts 0,2 --repeats 2 -- "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${SMALL[@]}"
printf '%s\n' "$IT_OUT" | sed 's/^/    /'
assert_contains "$IT_OUT" "workers  wall time  spread" "tune: prints a table with the runs' spread"
# A count is recommended only when it is faster by more than the spread of the runs, which a
# short job on a shared host may not be: either answer, said as such.
grep -qE '^(recommended: --workers [02] |no recommendation: --workers .*noise)' <<<"$IT_OUT" &&
  it_pass "tune: recommends a count or says the difference is noise" || it_fail "tune: no recommendation line"
assert_contains "$IT_ERR" "[4/4] workers 2, run 2/2" "tune: shows progress, every count twice"
rows=$(grep -cE '^ +[0-2] ' <<<"$IT_OUT")
assert_eq 2 "$rows" "tune: one row per count"
assert_exit 0 "$CTL" tune --json --batch-size 32 --gpu-request none --counts 1,2 --repeats 2 -- "${WL_MOUNT[@]}" "$IMAGE" "${WL[@]}" "${SMALL[@]}"
assert_eq 2 "$(jq -r '.runs | length' <<<"$IT_OUT" 2>/dev/null)" "tune --json: two runs"
assert_eq "1|2" "$(jq -r '[.runs[].workers] | map(tostring) | join("|")' <<<"$IT_OUT" 2>/dev/null)" "tune --json: the counts"
best=$(jq -r '.recommended_workers' <<<"$IT_OUT" 2>/dev/null)
close=$(jq -r '.within_spread_of_fastest | length' <<<"$IT_OUT" 2>/dev/null)
[[ ($best =~ ^[12]$ && $close == 1) || ($best == null && $close -gt 1) ]] &&
  it_pass "tune --json: recommended $best, $close within the spread" || it_fail "tune --json: recommended [$best], [$close] close"
assert_eq 2 "$(jq -r '.runs[0].runs_s | length' <<<"$IT_OUT" 2>/dev/null)" "tune --json: two runs per count"
assert_eq true "$(jq -r '[.runs[] | select(.workers > 0) | .peak_shm > 0] | all' <<<"$IT_OUT" 2>/dev/null)" \
  "tune --json: runs with workers used /dev/shm"
assert_eq 0 "$(docker ps -aq | wc -l)" "tune and calibrate leave no containers"
assert_exit 2 "$CTL" tune --counts 1 --repeats 1 -- "$IMAGE" true
assert_contains "$IT_ERR" "--repeats 1: expected 2..100" "tune: one run per count has no spread"
assert_exit 2 "$CTL" tune --counts 1,x -- "$IMAGE" true
assert_contains "$IT_ERR" "--counts" "tune: a bad --counts names the flag"
assert_exit 2 "$CTL" tune --counts 1 -- --workers 2 "$IMAGE" true
assert_contains "$IT_ERR" "--workers" "tune: --workers after -- is refused"

# --- doctor reads the crash: real PyTorch jobs killed by a 16 MiB /dev/shm ------------------------
CRASH=(/usr/bin/python3 /t/torch_crash.py)
docker run --name crash-dl --shm-size 16m "${WL_MOUNT[@]}" "$IMAGE" "${CRASH[@]}" dataloader >/dev/null 2>&1
assert_eq 1 "$(docker inspect -f '{{.State.ExitCode}}' crash-dl)" "crash: the DataLoader job failed"
assert_exit 4 "$CTL" doctor crash-dl
printf '%s\n' "$IT_OUT" | sed 's/^/    /'
assert_contains "$IT_OUT" "exited with status 1" "doctor: names the exit status"
assert_contains "$IT_OUT" "FAIL  dataloader-bus-error" "doctor: a worker's bus error"
assert_contains "$IT_OUT" "is killed by signal: Bus error" "doctor: quotes PyTorch's line"
assert_contains "$IT_OUT" "16MiB" "doctor: the container's /dev/shm size"
assert_contains "$IT_OUT" "fix: rerun sized for the job: gpu-run --profile" "doctor: the command that fixes it"
docker logs crash-dl >"$work/crash-dl.log" 2>&1
assert_exit 4 "$CTL" doctor --log - <"$work/crash-dl.log"
assert_contains "$IT_OUT" "FAIL  dataloader-bus-error" "doctor --log -: the same from docker logs"
assert_exit 4 "$CTL" doctor --json --log "$work/crash-dl.log"
assert_eq worker-killed-by-bus-error "$(jq -r '[.facts.evidence[].kind] | map(select(. == "worker-killed-by-bus-error")) | first' <<<"$IT_OUT")" \
  "doctor --log --json: the evidence"
docker run --name crash-main --shm-size 16m "${WL_MOUNT[@]}" "$IMAGE" "${CRASH[@]}" share >/dev/null 2>&1
assert_eq 135 "$(docker inspect -f '{{.State.ExitCode}}' crash-main)" "crash: the main process died of SIGBUS"
assert_exit 4 "$CTL" doctor crash-main
assert_contains "$IT_OUT" "FAIL  sigbus-exit" "doctor: exit status 135 is a bus error"
docker run --name crash-none --shm-size 256m "${WL_MOUNT[@]}" "$IMAGE" "${CRASH[@]}" dataloader >/dev/null 2>&1
assert_eq 0 "$(docker inspect -f '{{.State.ExitCode}}' crash-none)" "crash: the same job runs with 256 MiB"
assert_exit 0 "$CTL" doctor crash-none
assert_contains "$IT_OUT" "OK    crash-log" "doctor: a clean exit has nothing to report"
assert_exit 2 "$CTL" doctor --log "$work/crash-dl.log" crash-dl
assert_contains "$IT_ERR" "give one of them" "doctor: --log and CONTAINER together are refused"
docker rm -f crash-dl crash-main crash-none >/dev/null 2>&1
it_log "total $((SECONDS))s"
it_done
