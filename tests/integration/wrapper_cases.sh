# shellcheck shell=bash
# The checks of the gpu-run wrapper, shared by wrapper_docker_test.sh and
# wrapper_podman_test.sh. The caller has sourced lib.sh, started its engine, imported the
# busybox image, and set:
#   ENGINE     docker | podman (the command gpu-run execs, and the one these checks query)
#   IMAGE      the busybox image name
#   GPU_RUN    the gpu-run binary
# Expected sizes come from `gpu-run --json` and are checked against what the container's
# df shows; two cases are also computed by hand from the model in docs/profiles-and-sizing.md ("The sizing model").

# Prints the binary to test: $1, $GPU_RUN_BIN, $GPU_RUN_BIN_DIR/gpu-run or the release
# build tree; skips when none exists.
wrapper_find_binary() {
  local here candidate
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  for candidate in "${1:-}" "${GPU_RUN_BIN:-}" "${GPU_RUN_BIN_DIR:+$GPU_RUN_BIN_DIR/gpu-run}" \
    "$here/../../build/release/bin/gpu-run"; do
    if [[ -n $candidate && -x $candidate ]]; then
      GPU_RUN=$(cd "$(dirname "$candidate")" && pwd)/$(basename "$candidate")
      return 0
    fi
  done
  it_skip "gpu-run binary not found (pass it as \$1 or GPU_RUN_BIN; build with scripts/build)"
}

# Keeps the user's and the host's gpu-run settings out of the test: no config file (built-in
# defaults), no extra profile directories.
wrapper_isolate_config() {
  local dir=$1
  mkdir -p "$dir/xdg"
  export XDG_CONFIG_HOME=$dir/xdg
  export GPU_RUN_CONFIG=$dir/no-config.json
  unset GPU_RUN_PROFILE_PATH GPU_RUN_PROFILE GPU_RUN_GPUS GPU_RUN_WORKERS GPU_RUN_BATCH_SIZE \
    GPU_RUN_SHM_SIZE || true
}

gr() { "$GPU_RUN" --engine "$ENGINE" "$@"; }
eng() { "$ENGINE" "$@"; }
eng_count() { "$ENGINE" ps -aq | wc -l; }

# Prints the plan's shm_bytes from `gpu-run --json` output on stdin (empty if absent).
plan_shm_bytes() { jq -r '.plan.shm_bytes // empty' 2>/dev/null; }

# Prints the size column (KiB) of `df -k /dev/shm` output on stdin.
df_kib() { awk '$NF == "/dev/shm" { print $2 }'; }

# check_size DESC GPU_RUN_OPTION...: the plan's shm_bytes from --json must be what the
# container's /dev/shm shows. Prints the planned bytes.
check_size() {
  local desc=$1 json bytes before out
  shift
  before=$(eng_count)
  json=$(gr --gpu-request none "$@" --json --rm "$IMAGE" df -k /dev/shm 2>/dev/null)
  bytes=$(plan_shm_bytes <<<"$json")
  if [[ ! $bytes =~ ^[0-9]+$ ]]; then
    it_fail "$desc: no shm_bytes in --json output: [$json]"
    return
  fi
  assert_eq "$before" "$(eng_count)" "$desc: --json starts no container"
  assert_contains "$json" '"argv"' "$desc: --json has the argv"
  out=$(gr --gpu-request none "$@" --rm "$IMAGE" df -k /dev/shm 2>&1)
  assert_eq "$((bytes / 1024))" "$(df_kib <<<"$out")" "$desc: container /dev/shm is the planned $((bytes / 1048576)) MiB"
  PLANNED_BYTES=$bytes
}

# check_bad DESC GPU_RUN_ARG...: must exit 2 with one line on stderr and start nothing.
check_bad() {
  local desc=$1 before lines
  shift
  before=$(eng_count)
  assert_exit 2 gr "$@"
  lines=$(printf '%s' "$IT_ERR" | grep -c '')
  assert_eq 1 "$lines" "$desc: one line on stderr [$IT_ERR]"
  assert_eq "$before" "$(eng_count)" "$desc: starts no container"
}

wrapper_run_cases() {
  local work=$1 out json before n

  # --help / --version
  assert_exit 0 "$GPU_RUN" --help
  assert_contains "$IT_OUT$IT_ERR" "--profile" "--help documents --profile"
  assert_exit 0 "$GPU_RUN" --version
  assert_contains "$IT_OUT" "gpu-run" "--version names the program"

  # Sizes planned by --json are what the containers get.
  check_size "mnist 1 GPU" --profile mnist --gpus 1
  check_size "cifar 1 GPU 2 workers" --profile cifar --gpus 1 --workers 2
  # By hand: batch pageup(128*3*32*32*4) + pageup(128*8) = 1572864 + 4096 = 1576960; pin_memory
  # but --gpu-request none: no GPU reaches the container, PyTorch does not pin -> hold 2, +1 without
  # persistent_workers (a new pass's workers keep the last pass's last batch mapped) = hold 3;
  # per_rank = (2*2+3) * 1576960 + 4096*(8+5*2) semaphore pages = 11112448; * headroom 1.05 =
  # 11668070.4 -> 12 MiB need, raised to min_shm 128 MiB = 134217728.
  assert_eq 134217728 "$PLANNED_BYTES" "cifar 1 GPU 2 workers: hand-computed 12 MiB need, min_shm 128 MiB"
  check_size "imagenet 2 GPUs 2 workers" --profile imagenet --gpus 2 --workers 2
  # By hand: batch pageup(64*3*224*224*4) + pageup(64*8) = 38535168 + 4096 = 38539264; pinned,
  # but no GPU reaches the container (--gpu-request none): hold 2, +1 not persistent = hold 3;
  # per_rank = (2*2+3) * 38539264 + 4096*(8+5*2) = 269848576; NCCL's SHM segments for 2 ranks
  # (2 channels, 1 peer): 2*2*1*(9637888+4096) = 38567936; 2*269848576 + 38567936 = 578265088;
  # * headroom 1.05 = 607178342.4; 579 MiB = 607125504 < it <= 580 MiB = 608174080 -> 580 MiB.
  assert_eq $((580 * 1048576)) "$PLANNED_BYTES" "imagenet 2 GPUs 2 workers: hand-computed 580 MiB"
  check_size "imagenet 1 GPU auto workers" --profile imagenet --gpus 1
  check_size "imagenet 4 GPUs 1 worker batch 32" --profile imagenet --gpus 4 --workers 1 --batch-size 32
  check_size "cifar 2 GPUs prefetch 4" --profile cifar --gpus 2 --workers 3 --prefetch-factor 4
  check_size "coco 1 GPU" --profile coco --gpus 1 --workers 2
  check_size "multi-gpu 2 GPUs" --profile multi-gpu --gpus 2 --workers 1
  check_size "default profile, device list" --profile default --gpus device=0,1 --workers 1

  # A profile given as a path, by hand: pageup(100 * 1 MiB) = 100 MiB per batch,
  # (2 * 3 + 3) batches (pin_memory false -> hold 2, +1 not persistent) + the loader's semaphore
  # pages 4096 * (8 + 5 * 3) = 92 KiB, headroom 1, one rank: 900 MiB + 92 KiB -> 901 MiB.
  mkdir -p "$work/profiles/team" "$work/profiles/dir.json"
  cat >"$work/custom.json" <<'EOF'
{
  "name": "custom",
  "extends": "default",
  "sample_bytes": 1048576,
  "batch_size": 100,
  "workers_per_gpu": 3,
  "prefetch_factor": 2,
  "pin_memory": false,
  "headroom": 1.0,
  "min_shm": "1m",
  "max_shm": "10g"
}
EOF
  check_size "profile given as a path" --profile "$work/custom.json" --gpus 1
  assert_eq $((901 * 1048576)) "$PLANNED_BYTES" "profile given as a path: hand-computed 901 MiB"
  sed 's/"name": "custom"/"name": "team\/custom"/' "$work/custom.json" >"$work/profiles/team/custom.json"
  check_size "team profile from --profile-dir" --profile-dir "$work/profiles" --profile team/custom --gpus 1
  assert_eq $((901 * 1048576)) "$PLANNED_BYTES" "team profile from --profile-dir: 901 MiB"
  # The same profile with pin_memory true: with a GPU in the container the pin thread copies
  # batches out, hold 0 (the +1 is a worker-held batch, counted only when
  # unpinned): (2 * 3 + 0) * 100 MiB + 92 KiB -> 601 MiB (planned only: no GPU here);
  # with --gpu-request none no GPU reaches it, and with --gpus 0 there is none: PyTorch starts no
  # pin thread, hold 3: 901 MiB.
  sed -e 's/"pin_memory": false/"pin_memory": true/' -e 's/"name": "custom"/"name": "custom-pin"/' "$work/custom.json" \
    >"$work/custom-pin.json"
  json=$(gr --gpu-request docker --profile "$work/custom-pin.json" --gpus 1 --json --rm "$IMAGE" true 2>/dev/null)
  assert_eq $((601 * 1048576)) "$(plan_shm_bytes <<<"$json")" "pin_memory, GPU handed to the engine: 601 MiB (hold 0)"
  check_size "pin_memory profile, --gpu-request none" --profile "$work/custom-pin.json" --gpus 1
  assert_eq $((901 * 1048576)) "$PLANNED_BYTES" "pin_memory with --gpu-request none: hand-computed 901 MiB (hold 3)"
  check_size "pin_memory profile without a GPU" --profile "$work/custom-pin.json" --gpus 0
  assert_eq $((901 * 1048576)) "$PLANNED_BYTES" "pin_memory with --gpus 0: hand-computed 901 MiB (hold 3)"

  # One name per fact (issue 40): the workers given with -e under either name plan as --workers
  # (they were passed to the container and ignored by the plan); two values are refused.
  check_size "--workers 8" --profile imagenet --gpus 2 --workers 8
  n=$PLANNED_BYTES
  check_size "-e GPU_RUN_WORKERS=8" --profile imagenet --gpus 2 -e GPU_RUN_WORKERS=8
  assert_eq "$n" "$PLANNED_BYTES" "-e GPU_RUN_WORKERS=8 plans as --workers 8"
  check_size "-e GPU_RUN_NUM_WORKERS=8" --profile imagenet --gpus 2 -e GPU_RUN_NUM_WORKERS=8
  assert_eq "$n" "$PLANNED_BYTES" "-e GPU_RUN_NUM_WORKERS=8 plans as --workers 8"
  check_size "-e GPU_RUN_PROFILE, -e GPU_RUN_GPUS" -e GPU_RUN_PROFILE=imagenet -e GPU_RUN_GPUS=2 --workers 8
  assert_eq "$n" "$PLANNED_BYTES" "the profile and GPUs given with -e plan as their flags"
  check_bad "-e GPU_RUN_WORKERS=4 -e GPU_RUN_NUM_WORKERS=8" --profile imagenet -e GPU_RUN_WORKERS=4 \
    -e GPU_RUN_NUM_WORKERS=8 --rm "$IMAGE" true
  assert_contains "$IT_ERR" "GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers)" "the line names both"

  # What the container is told: env and label.
  out=$(gr --gpu-request none --profile cifar --gpus 1 --workers 2 --rm "$IMAGE" env 2>&1)
  assert_contains "$out" "GPU_RUN_PROFILE=cifar" "env GPU_RUN_PROFILE"
  assert_contains "$out" "GPU_RUN_WORKERS=2" "env GPU_RUN_WORKERS"
  assert_contains "$out" "GPU_RUN_NUM_WORKERS=2" "env GPU_RUN_NUM_WORKERS, its alias, for the scripts that read it"
  assert_contains "$out" "GPU_RUN_BATCH_SIZE=128" "env GPU_RUN_BATCH_SIZE"
  assert_contains "$out" "GPU_RUN_SHM_SIZE=" "env GPU_RUN_SHM_SIZE"
  eng rm -f gr-label >/dev/null 2>&1
  assert_exit 0 gr --gpu-request none --profile cifar --name gr-label "$IMAGE" true
  out=$(eng inspect -f '{{index .Config.Labels "gpu-run.profile"}}' gr-label 2>&1)
  assert_eq cifar "$out" "label gpu-run.profile on the container"
  eng rm -f gr-label >/dev/null 2>&1

  # --dry-run prints the engine's argv and starts nothing; the printed line runs as is.
  before=$(eng_count)
  assert_exit 0 gr --gpu-request none --profile imagenet --gpus 2 --workers 2 --dry-run --rm "$IMAGE" df -k /dev/shm
  out=$IT_OUT
  assert_eq "$before" "$(eng_count)" "--dry-run starts no container"
  assert_contains "$out" "--shm-size" "--dry-run argv has --shm-size"
  assert_contains "$out" "580m" "--dry-run argv has the 580m size"
  assert_contains "$out" "$ENGINE" "--dry-run argv names the engine"
  assert_not_contains "$out" "--gpus" "--gpu-request none: no --gpus in argv"
  assert_not_contains "$out" "nvidia.com/gpu" "--gpu-request none: no CDI device in argv"
  n=$(eval "$out" 2>&1 | df_kib)
  assert_eq 593920 "$n" "the --dry-run command line, run by a shell, gives 580 MiB (580 * 1024 KiB)"

  # GPU requests (dry run only: no GPUs here).
  assert_exit 0 gr --gpu-request docker --profile mnist --gpus 2 --dry-run "$IMAGE" true
  assert_contains "$IT_OUT" "--gpus" "--gpu-request docker passes --gpus"
  assert_exit 0 gr --gpu-request cdi --profile mnist --gpus device=0,1 --dry-run "$IMAGE" true
  assert_contains "$IT_OUT" "nvidia.com/gpu" "--gpu-request cdi passes a CDI device"

  # --gpus 0 is no GPU: no GPU request reaches the engine (Docker's --gpus 0 fails: could not select
  # device driver), whatever --gpu-request says; the container runs.
  for mode in docker cdi; do
    assert_exit 0 gr --gpu-request "$mode" --profile mnist --gpus 0 --dry-run --rm "$IMAGE" true
    assert_not_contains "$IT_OUT" "--gpus" "--gpus 0, --gpu-request $mode: no --gpus in argv"
    assert_not_contains "$IT_OUT" "nvidia.com/gpu" "--gpus 0, --gpu-request $mode: no CDI device in argv"
    assert_exit 0 gr --gpu-request "$mode" --profile mnist --gpus 0 --rm "$IMAGE" true
  done
  assert_exit 0 gr --gpus 0 --rm "$IMAGE" true

  # --json starts nothing and parses the same plan.
  before=$(eng_count)
  json=$(gr --gpu-request none --profile imagenet --gpus 2 --workers 2 --json "$IMAGE" true 2>/dev/null)
  assert_eq "$before" "$(eng_count)" "--json starts no container"
  assert_contains "$json" '"plan"' "--json has the plan"
  # (2 x 2 + hold 3: pinned, but no GPU reaches it; not persistent) x 36.8 MiB + 72 KiB = 257.3 MiB
  # a rank; 2 ranks + NCCL 36.8 MiB = 551.5 MiB; headroom 1.05: 580 MiB.
  assert_eq $((580 * 1048576)) "$(plan_shm_bytes <<<"$json")" "--json shm_bytes"

  # --explain prints a breakdown on stderr and runs the container.
  assert_exit 0 gr --gpu-request none --profile cifar --gpus 1 --workers 2 --explain --rm "$IMAGE" df -k /dev/shm
  assert_eq 131072 "$(df_kib <<<"$IT_OUT")" "--explain runs the container with the planned size"
  assert_contains "$IT_ERR" "128" "--explain breakdown on stderr mentions the size"

  # The container's exit code passes through.
  assert_exit 7 gr --profile mnist --gpu-request none --rm "$IMAGE" sh -c 'exit 7'
  assert_exit 0 gr --profile mnist --gpu-request none --rm "$IMAGE" true

  # The user's explicit --shm-size wins, with a warning (the plan is 580 MiB, above).
  assert_exit 0 gr --gpu-request none --profile imagenet --gpus 2 --workers 2 --shm-size 300m --rm "$IMAGE" df -k /dev/shm
  assert_eq 307200 "$(df_kib <<<"$IT_OUT")" "explicit --shm-size 300m wins"
  assert_contains "$IT_ERR" "shm" "explicit --shm-size: warning on stderr"
  assert_exit 0 gr --gpu-request none --profile imagenet --gpus 2 --dry-run --shm-size=300m "$IMAGE" true
  assert_eq 1 "$(grep -o -- '--shm-size' <<<"$IT_OUT" | wc -l)" "--shm-size=300m: only the user's --shm-size in argv"

  # --tmpfs /dev/shm:size=SIZE is the user's size: the engine mounts it over its own /dev/shm, so
  # the container gets it and what gpu-run records says it (issue 35).
  eng rm -f gr-tmpfs >/dev/null 2>&1
  assert_exit 0 gr --gpu-request none --profile imagenet --gpus 2 --name gr-tmpfs --tmpfs /dev/shm:size=100m "$IMAGE" \
    sh -c 'df -k /dev/shm; echo "env=$GPU_RUN_SHM_SIZE"'
  assert_eq 102400 "$(df_kib <<<"$IT_OUT")" "--tmpfs /dev/shm:size=100m: the container's /dev/shm is 100 MiB"
  assert_contains "$IT_OUT" "env=100m" "--tmpfs /dev/shm:size=100m: GPU_RUN_SHM_SIZE says 100m"
  assert_eq 100m "$(eng inspect -f '{{index .Config.Labels "gpu-run.shm-size"}}' gr-tmpfs 2>&1)" \
    "--tmpfs /dev/shm:size=100m: the label says 100m"
  assert_contains "$IT_ERR" "--tmpfs /dev/shm:size=100m (100MiB) is below gpu-run's plan" "--tmpfs: below the plan, warned"
  eng rm -f gr-tmpfs >/dev/null 2>&1
  # A directory on disk bound onto /dev/shm is not the host's /dev/shm.
  mkdir -p "$work/scratch"
  assert_exit 0 gr --gpu-request none --profile imagenet -v "$work/scratch:/dev/shm" --rm "$IMAGE" sh -c 'echo x >/dev/shm/f'
  assert_contains "$IT_ERR" "a bind mount of $work/scratch onto /dev/shm" "-v DIR:/dev/shm: named as that directory"
  assert_not_contains "$IT_ERR" "host's /dev/shm" "-v DIR:/dev/shm: not called the host's /dev/shm"
  [[ -f $work/scratch/f ]] && it_pass "-v DIR:/dev/shm: the container wrote into DIR" || it_fail "-v DIR:/dev/shm: no file in DIR"

  # --ipc=host: the host's /dev/shm is not ours to size.
  assert_exit 0 gr --gpu-request none --profile imagenet --gpus 2 --dry-run --ipc=host "$IMAGE" true
  assert_not_contains "$IT_OUT" "--shm-size" "--ipc=host: no --shm-size in argv"
  assert_not_contains "$IT_OUT" "GPU_RUN_SHM_SIZE" "--ipc=host: no size recorded that was not applied"
  assert_not_contains "$IT_OUT" "gpu-run.shm-size" "--ipc=host: no gpu-run.shm-size label"
  assert_contains "$IT_OUT" "GPU_RUN_GPUS=2" "--gpus 2: the GPU count is recorded"
  assert_contains "$IT_OUT" "gpu-run.gpus=2" "--gpus 2: the gpu-run.gpus label"
  assert_contains "$IT_OUT" "--ipc=host" "--ipc=host passed on"
  assert_contains "$IT_ERR" "ipc" "--ipc=host: warning on stderr"

  # Memory limit: a plan that fits runs; one that does not is refused before anything starts.
  assert_exit 0 gr --gpu-request none --profile cifar --gpus 1 --workers 2 --memory 1g --rm "$IMAGE" df -k /dev/shm
  assert_eq 131072 "$(df_kib <<<"$IT_OUT")" "--memory 1g with cifar: runs with 128 MiB"
  check_bad "--memory 512m with imagenet 2 GPUs" --gpu-request none --profile imagenet --gpus 2 --workers 2 --memory 512m --rm "$IMAGE" true
  check_bad "--memory=512m with imagenet 2 GPUs" --gpu-request none --profile imagenet --gpus 2 --workers 2 --memory=512m --rm "$IMAGE" true

  # Engine options with values pass through untouched; so do the command's own arguments.
  mkdir -p "$work/share"
  echo from-host >"$work/share/marker"
  # shellcheck disable=SC2016 # expanded by the container's shell
  out=$(gr --gpu-request none --profile mnist -e FOO=bar -v "$work/share:/hosttmp" --env=X=1 --rm \
    "$IMAGE" sh -c 'echo "FOO=$FOO X=$X"; cat /hosttmp/marker' 2>&1)
  assert_contains "$out" "FOO=bar X=1" "-e FOO=bar and --env=X=1 reach the container"
  assert_contains "$out" "from-host" "-v host:container reaches the container"
  out=$(gr --gpu-request none --profile mnist --rm -w /tmp --hostname gr-host "$IMAGE" sh -c 'pwd; hostname' 2>&1)
  assert_contains "$out" "/tmp" "-w /tmp reaches the container"
  assert_contains "$out" "gr-host" "--hostname reaches the container"
  out=$(gr --gpu-request none --profile mnist --rm "$IMAGE" echo --profile x --gpus 3 --dry-run 2>&1 | it_drop_engine_warnings)
  assert_eq "--profile x --gpus 3 --dry-run" "$out" "arguments after IMAGE reach the command untouched"

  # Bad input: exit 2, one line on stderr, nothing started.
  printf '{"name": "broken", ' >"$work/profiles/broken.json"
  printf '{"name": "typo", "extends": "default", "batch_sise": 32}\n' >"$work/profiles/typo.json"
  printf '{"name": "bigmin", "extends": "default", "min_shm": "2x"}\n' >"$work/profiles/bigmin.json"
  printf '{"name": "negmax", "extends": "default", "max_shm": "-1g"}\n' >"$work/profiles/negmax.json"
  printf '{"name": "huge", "extends": "default", "nccl_reserve": "99999999t"}\n' >"$work/profiles/huge.json"
  printf '{"name": "escape", "extends": "../default"}\n' >"$work/profiles/escape.json"
  printf '{"default_profile": ' >"$work/bad-config.json"
  local pd=(--gpu-request none --profile-dir "$work/profiles")
  check_bad "unknown profile" "${pd[@]}" --profile nosuch --rm "$IMAGE" true
  check_bad "malformed profile JSON" "${pd[@]}" --profile broken --rm "$IMAGE" true
  check_bad "unknown profile key" "${pd[@]}" --profile typo --rm "$IMAGE" true
  check_bad "profile size 2x" "${pd[@]}" --profile bigmin --rm "$IMAGE" true
  check_bad "profile size -1g" "${pd[@]}" --profile negmax --rm "$IMAGE" true
  check_bad "profile size 99999999t" "${pd[@]}" --profile huge --gpus 2 --rm "$IMAGE" true
  check_bad "extends with .." "${pd[@]}" --profile escape --rm "$IMAGE" true
  check_bad "--memory 2x" "${pd[@]}" --profile mnist --memory 2x --rm "$IMAGE" true
  check_bad "--memory -1g" "${pd[@]}" --profile mnist --memory -1g --rm "$IMAGE" true
  check_bad "--memory 99999999t" "${pd[@]}" --profile mnist --memory 99999999t --rm "$IMAGE" true
  check_bad "--gpus 0x" "${pd[@]}" --profile mnist --gpus 0x --rm "$IMAGE" true
  check_bad "--workers -3" "${pd[@]}" --profile mnist --workers -3 --rm "$IMAGE" true
  check_bad "profile name with .." "${pd[@]}" --profile ../mnist --rm "$IMAGE" true
  check_bad "absolute path that is no .json profile" "${pd[@]}" --profile /etc/passwd --rm "$IMAGE" true
  check_bad "profile file is a directory (name)" "${pd[@]}" --profile dir --rm "$IMAGE" true
  check_bad "profile file is a directory (path)" "${pd[@]}" --profile "$work/profiles/dir.json" --rm "$IMAGE" true
  before=$(eng_count)
  assert_exit 2 "$GPU_RUN" --engine nosuch --gpu-request none --profile mnist --rm "$IMAGE" true
  assert_eq 1 "$(printf '%s' "$IT_ERR" | grep -c '')" "unknown --engine: one line on stderr [$IT_ERR]"
  assert_eq "$before" "$(eng_count)" "unknown --engine: starts no container"
  check_bad "unknown --gpu-request" --gpu-request nosuch --profile mnist --rm "$IMAGE" true
  GPU_RUN_CONFIG=$work/bad-config.json check_bad "malformed GPU_RUN_CONFIG" --gpu-request none --profile mnist --rm "$IMAGE" true
}
