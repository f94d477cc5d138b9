#!/usr/bin/env bash
# Runs `gpu-run-ctl doctor --log` on every case of tests/data/crash-logs/cases.json and checks the
# diagnosis its thread settled on: the finding, its level, the fix in the engine's terms, the exit
# status of the worst finding, and that no look-alike is told to resize /dev/shm.
# Usage: corpus_test.sh PATH/TO/gpu-run-ctl
set -uo pipefail
ctl=${1:?usage: corpus_test.sh GPU_RUN_CTL}
dir=$(cd "$(dirname "$0")/../data/crash-logs" && pwd)
command -v jq >/dev/null || { echo "corpus_test: jq is missing (scripts/install-deps installs it)"; exit 1; }
passed=0 failed=0
while IFS=$'\t' read -r file class check level fix; do
  out=$("$ctl" doctor --log "$dir/$file" --json 2>/dev/null)
  code=$?
  worst=$(jq -r .worst <<<"$out")
  want_code=$(case $worst in OK) echo 0 ;; WARN) echo 3 ;; FAIL) echo 4 ;; *) echo x ;; esac)
  problem=""
  [[ $code == "$want_code" ]] || problem="exit $code for worst $worst"
  jq -e --arg c "$check" --arg l "$level" --arg f "$fix" \
    'any(.findings[]; .check == $c and .level == $l and ((.fix // "") | contains($f)))' <<<"$out" >/dev/null ||
    problem+=" no $check=$level with \"$fix\" in its fix (got $(jq -r '[.findings[] | .check + "=" + .level] | join(" ")' <<<"$out"))"
  if [[ $class == lookalike || $class == fd || $class == healthy ]] &&
    jq -e 'any(.findings[]; (.fix // "") | test("--shm-size|gpu-run --profile|gpu-run --guard|gpu-run-ctl resize|emptyDir"))' <<<"$out" >/dev/null; then
    problem+=" a look-alike given a /dev/shm fix"
  fi
  if [[ -n $problem ]]; then
    echo "FAIL $file:$problem"
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done < <(jq -r '.[] | [.file, .class, .expect_check, .expect_level, .expect_fix] | @tsv' "$dir/cases.json")
echo "$passed passed, $failed failed"
[[ $failed == 0 && $passed -ge 60 ]]
