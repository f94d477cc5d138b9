#!/usr/bin/env bash
# A malformed or unreadable gpu-run config never blocks a container's teardown: under real runc,
# gpu-run-runtime refuses a create for it (exit 2, the config named), but passes state, start,
# kill and delete to runc, which answers with its own exit code and words; a container created
# while the config was good is started, killed and deleted through gpu-run-runtime after the
# config broke, and so it is through a chain file.
set -u
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/oci_lib.sh"
it_require_root
it_require_cmd runc jq cmp

work=$(it_tmpdir)
ROOT=$work/runc-root
ID=gr-teardown-$$
it_on_exit rm -rf "$work"
it_on_exit runc --root "$ROOT" delete -f "$ID"
it_on_exit runc --root "$ROOT" delete -f "$ID-chain"
it_rootfs
export GPU_RUN_CONFIG=$work/gpu-run.json
printf '{"log_file": "%s"}\n' "$work/gpu-run.log" >"$GPU_RUN_CONFIG"
new_bundle "$work/b"
edit_bundle "$work/b" '.process.args = ["sleep", "600"]'

# gpu_run VERB ARGS...: gpu-run-runtime with runc's private root; runc VERB ARGS...: runc's own
# answer, for the comparison.
gpu_run() { "$RUNTIME" --root "$ROOT" "$@"; }
status() { runc --root "$ROOT" state "$1" | jq -r .status; }

# --- a container created with a good config -----------------------------------------------------
(cd "$work/b" && gpu_run create "$ID" </dev/null >/dev/null 2>&1)
assert_eq created "$(status "$ID")" "control: gpu-run-runtime created the container with a good config"

# --- the config breaks: create is refused, the other verbs reach runc -------------------------------
for broken in malformed unreadable; do
  if [[ $broken == malformed ]]; then
    printf '{"log_file": ' >"$GPU_RUN_CONFIG"
  else
    rm -f "$GPU_RUN_CONFIG"
    mkdir "$GPU_RUN_CONFIG" # read(2) fails: EISDIR
  fi
  assert_exit 2 bash -c "cd '$work/b' && '$RUNTIME' --root '$ROOT' create '$ID-refused' </dev/null"
  assert_contains "$IT_ERR" "$GPU_RUN_CONFIG" "$broken config: create is refused, naming the config"
  assert_eq "" "$(runc --root "$ROOT" list -q | grep -x "$ID-refused")" "$broken config: the refused create made nothing"
  # Each verb on a container that does not exist: runc's exit code and words, byte for byte.
  for verb in state start kill delete; do
    args=("$verb" "$ID-missing")
    [[ $verb == kill ]] && args+=(KILL)
    want_rc=0
    runc --root "$ROOT" "${args[@]}" >"$work/want.out" 2>"$work/want.err" || want_rc=$?
    assert_exit "$want_rc" gpu_run "${args[@]}"
    assert_eq "$(sed 's/^time="[^"]*" //' "$work/want.err")" "$(sed 's/^time="[^"]*" //' <<<"$IT_ERR")" \
      "$broken config: gpu-run-runtime $verb of a missing container says what runc says"
  done
  assert_eq 1 "$want_rc" "$broken config: runc's own code for a missing container is 1 (not gpu-run's 2)"
  rm -rf "$GPU_RUN_CONFIG"
done

# --- the container created before runs through its teardown with the config broken ----------------
printf 'not json' >"$GPU_RUN_CONFIG"
assert_exit 0 gpu_run state "$ID"
assert_eq created "$(jq -r .status <<<"$IT_OUT")" "malformed config: state answers"
assert_exit 0 gpu_run start "$ID"
assert_eq running "$(status "$ID")" "malformed config: start ran the container"
assert_exit 0 gpu_run kill "$ID" KILL
for _ in $(seq 50); do [[ $(status "$ID") == stopped ]] && break; sleep 0.1; done
assert_eq stopped "$(status "$ID")" "malformed config: kill stopped it"
assert_exit 0 gpu_run delete "$ID"
assert_eq "" "$(runc --root "$ROOT" list -q | grep -x "$ID")" "malformed config: delete removed it"

# --- through a chain file (configure's entry): the same -----------------------------------------------
printf '#!%s --chain\nruntime=%s\n' "$RUNTIME" "$(command -v runc)" >"$work/chain"
chmod 755 "$work/chain"
printf '{"log_file": "%s"}\n' "$work/gpu-run.log" >"$GPU_RUN_CONFIG"
(cd "$work/b" && "$work/chain" --root "$ROOT" create "$ID-chain" </dev/null >/dev/null 2>&1)
assert_eq created "$(status "$ID-chain")" "chain: created with a good config"
printf '{' >"$GPU_RUN_CONFIG"
assert_exit 2 bash -c "cd '$work/b' && '$work/chain' --root '$ROOT' create '$ID-refused' </dev/null"
assert_contains "$IT_ERR" "$GPU_RUN_CONFIG" "chain, malformed config: create is refused, naming the config"
assert_exit 1 "$work/chain" --root "$ROOT" delete "$ID-missing"
assert_contains "$IT_ERR" "container does not exist" "chain, malformed config: delete of a missing container is runc's"
for verb in start kill delete; do
  args=("$verb" "$ID-chain")
  [[ $verb == kill ]] && args+=(KILL)
  assert_exit 0 "$work/chain" --root "$ROOT" "${args[@]}"
  [[ $verb == kill ]] && for _ in $(seq 50); do [[ $(status "$ID-chain") == stopped ]] && break; sleep 0.1; done
done
assert_eq "" "$(runc --root "$ROOT" list -q | grep -x "$ID-chain")" "chain, malformed config: start, kill, delete done"

it_done
