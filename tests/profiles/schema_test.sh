#!/usr/bin/env bash
# Every profile gpu-run writes validates against the published profiles/profile.schema.json,
# checked by a real JSON Schema validator (Debian's python3-jsonschema, validate.py): the
# built-in profiles; what `gpu-run-ctl profiles new` writes and prints, with several option
# combinations; the document `profiles show` prints; and the profiles `gpu-run-ctl calibrate`
# writes over a named parent and inlined, with and without NCCL's measured figure and ranks.
# calibrate runs for real against a stand-in for docker on PATH: its "container" is a process
# in a mount namespace of its own with a private /dev/shm, where it maps segments as NCCL does
# and holds a DataLoader's batch, and calibrate samples it as it samples a container's.
# Usage: schema_test.sh [PATH/TO/gpu-run-ctl]   (or the one in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../integration/lib.sh"
src=$(cd "$here/../.." && pwd)
schema=$src/profiles/profile.schema.json

# Debian's python3, where python3-jsonschema is (not a pyenv on PATH).
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import jsonschema' 2>/dev/null || it_skip "python3-jsonschema is needed (scripts/install-deps installs it)"
it_require_cmd jq unshare mount
it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_isolate_config "$work"
export GPU_RUN_BUILTIN_PROFILES=$src/profiles

# The stand-in's container needs a mount namespace with its own tmpfs on /dev/shm: root's, or
# one in a user namespace of its own.
if [[ $(id -u) -eq 0 ]]; then unshare=(unshare --mount); else unshare=(unshare --user --map-root-user --mount); fi
"${unshare[@]}" sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null ||
  it_skip "cannot mount a private /dev/shm in a new mount namespace (${unshare[*]}) for calibrate's stand-in container"
export GPU_RUN_TEST_UNSHARE="${unshare[*]}"

# assert_valid MSG FILE...: every FILE validates against the schema.
assert_valid() {
  local msg=$1 out
  shift
  if out=$("$PY" "$here/validate.py" "$schema" "$@" 2>&1); then it_pass "$msg"; else it_fail "$msg: $out"; fi
}

# --- the built-in profiles --------------------------------------------------------------------
builtins=()
for file in "$src"/profiles/*.json; do
  [[ $file == "$schema" ]] || builtins+=("$file")
done
[[ ${#builtins[@]} -ge 8 ]] || it_die "only ${#builtins[@]} built-in profiles in $src/profiles"
for file in "${builtins[@]}"; do assert_valid "built-in $(basename "$file")" "$file"; done

# --- profiles new ---------------------------------------------------------------------------
out=$work/new
assert_exit 0 "$CTL" profiles new team/minimal --fields :int8 --out-dir "$out"
assert_valid "profiles new: --fields only (extends default)" "$out/team/minimal.json"
assert_exit 0 "$CTL" profiles new team/resnet50 --fields image=3x224x224:float32,label=:int64 --batch-size 64 \
  --workers auto --prefetch-factor 4 --extends imagenet --description "ResNet-50 on ImageNet crops" --out-dir "$out"
assert_valid "profiles new: every option, extends imagenet, workers auto" "$out/team/resnet50.json"
assert_exit 0 "$CTL" profiles new team/video --fields 8x3x112x112:uint8,:int64 --batch-size 16 --workers 3 \
  --extends multi-gpu --out-dir "$out"
assert_valid "profiles new: workers 3, extends multi-gpu" "$out/team/video.json"
assert_exit 0 "$CTL" profiles new seg/deeplab512 --fields image=3x512x512:float,mask=512x512:long --batch-size 8 \
  --pin-memory false --nccl-transport p2p --loader train \
  --loader 'val:batch_size=4,workers=2,persistent_workers=true,fields=3x512x512:half,:torch.int' --out-dir "$out"
assert_valid "profiles new: pin_memory, nccl.transport, two loaders" "$out/seg/deeplab512.json"
# PyTorch's other dtype names are a profile's too, in a file a person writes.
printf '%s\n' '{"name": "aliases", "fields": [{"name": "a", "shape": [2], "dtype": "float"},' \
  '{"name": "b", "shape": [], "dtype": "torch.long"}, {"name": "c", "shape": [], "dtype": "double"}]}' >"$work/aliases.json"
assert_valid "a profile with the dtypes float, torch.long and double" "$work/aliases.json"
assert_exit 0 "$CTL" profiles validate "$work/aliases.json"
# A standalone profile must set keys profiles new has no option for: it is only printed.
assert_exit 0 "$CTL" profiles new solo --fields 4:float16 --batch-size 2 --workers 0 --extends none --print
printf '%s\n' "$IT_OUT" >"$work/solo.json"
assert_eq null "$(jq -r '.extends' "$work/solo.json")" "profiles new --extends none --print: extends null"
assert_valid "profiles new --extends none --print" "$work/solo.json"

# --- profiles show --------------------------------------------------------------------------
for name in default imagenet multi-gpu video team/resnet50; do
  "$CTL" profiles show --json --profile-dir "$out" "$name" | jq .profile >"$work/show.json" ||
    it_fail "profiles show --json $name failed"
  assert_valid "profiles show $name" "$work/show.json"
done

# --- calibrate ------------------------------------------------------------------------------
# A stand-in for docker: `run --cidfile PATH ...` starts the container and writes the cidfile;
# `inspect` reports the container's process as its init, running.
mkdir -p "$work/bin"
cat >"$work/bin/docker" <<'EOF'
#!/bin/sh
d=$(dirname "$0")
case $1 in
run)
  [ "$2" = --cidfile ] || exit 90
  $GPU_RUN_TEST_UNSHARE sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec /usr/bin/python3 "$0"' \
    "$d/container.py" &
  echo $! >"$d/pid"
  printf feedfacefeedfacefeed >"$3"
  wait $!
  ;;
inspect) printf '[{"Id":"feedfacefeedfacefeed","State":{"Running":true,"Pid":%s}}]' "$(cat "$d/pid")" ;;
*) exit 91 ;;
esac
EOF
# Segments made as NCCL's SHM transport makes them (mkstemp, posix_fallocate, mmap, unlink; 4 MiB
# and NCCL's default 9,637,888 bytes), and 8 MiB of a DataLoader's batches.
cat >"$work/bin/container.py" <<'EOF'
import mmap, os, tempfile, time
segments = []
for size in (4 << 20, 9637888):
    fd, path = tempfile.mkstemp(prefix="nccl-", dir="/dev/shm")
    os.posix_fallocate(fd, 0, size)
    segments.append(mmap.mmap(fd, size))
    os.close(fd)
    os.unlink(path)
with open("/dev/shm/torch_batches", "wb") as f:
    f.write(b"\1" * (8 << 20))
time.sleep(1.5)
EOF
chmod +x "$work/bin/docker"
cal=$work/calibrated
nccl_bytes=$((4 * 1048576 + 9637888))
# calibrate NAME [OPTIONS...]: calibrates NAME into $cal over the stand-in.
calibrate() {
  local name=$1
  shift
  PATH="$work/bin:$PATH" assert_exit 0 "$CTL" calibrate --out-profile "$name" --out-dir "$cal" --workers 2 \
    --batch-size 8 --gpu-request none "$@" -- img true
}

calibrate team/over-imagenet --profile imagenet --gpus 2
file=$cal/team/over-imagenet.json
assert_eq "imagenet|$nccl_bytes|2" "$(jq -r '"\(.extends)|\(.nccl.measured)|\(.nccl.measured_ranks)"' "$file")" \
  "calibrate --gpus 2 over imagenet: extends it, NCCL's segments measured for 2 ranks"
assert_eq number "$(jq -r '.calibration.peak_shm | type' "$file")" "calibrate: the peak is a byte count"
assert_valid "calibrate --gpus 2 over a named profile (nccl.measured, nccl.measured_ranks)" "$file"

# A profile given as a path is inlined, every key of it (loaders too) with the measurement.
mkdir -p "$work/base"
cat >"$work/base/two-loaders.json" <<'EOF'
{
  "name": "two-loaders",
  "extends": "multi-gpu",
  "loaders": [{"name": "train"}, {"name": "val", "batch_size": 32, "workers": 1, "persistent_workers": true}]
}
EOF
calibrate team/inlined --profile "$work/base/two-loaders.json" --gpus 2
file=$cal/team/inlined.json
assert_eq "null|2|2" "$(jq -r '"\(.extends)|\(.loaders | length)|\(.nccl.measured_ranks)"' "$file")" \
  "calibrate over a path: inlined with its loaders, NCCL measured for 2 ranks"
assert_valid "calibrate --gpus 2 over a profile given as a path (inlined)" "$file"

calibrate team/one-rank
file=$cal/team/one-rank.json
assert_eq "default|null" "$(jq -r '"\(.extends)|\(.nccl)"' "$file")" "calibrate, one rank: no nccl section"
assert_valid "calibrate over default, one rank" "$file"

assert_exit 0 "$CTL" profiles validate "$cal"

it_done
