#!/usr/bin/env bash
# A team's profile from its first line to a package and a job, as docs/profiles-and-sizing.md
# tells it: `profiles new TEAM/NAME --out-dir DIR`, `profiles validate DIR`,
# packaging/team-profile-package on that same DIR, and the file copied into a job's repository
# and given to gpu-run by its path. The built binaries; no daemon (gpu-run --dry-run).
# Usage: team_profile_test.sh [PATH/TO/gpu-run]
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
src=$(cd "$here/../.." && pwd)

it_require_cmd dpkg-deb jq
it_binaries "${1:-}" gpu-run gpu-run-ctl
d=$(it_tmpdir)
it_on_exit rm -rf "$d"
it_isolate_config "$d"
ctl=$IT_BIN/gpu-run-ctl

# A realistic profile in one command: named fields with PyTorch's dtype names, pin_memory, NCCL's
# transport and a second loader.
assert_exit 0 "$ctl" profiles new seg/deeplab512 --out-dir "$d/profiles" \
  --fields 'image=3x512x512:float,mask=512x512:long' --batch-size 8 --workers 4 --pin-memory false \
  --nccl-transport p2p --loader train --loader 'val:batch_size=4,workers=2,fields=3x512x512:half'
assert_contains "$IT_OUT" "wrote $d/profiles/seg/deeplab512.json" "profiles new writes DIR/TEAM/NAME.json"
doc=$(cat "$d/profiles/seg/deeplab512.json" 2>/dev/null)
assert_eq "float32 int64" "$(jq -r '[.fields[].dtype] | join(" ")' <<<"$doc")" "PyTorch's float and long are written as float32 and int64"
assert_eq "false p2p val 4 2" "$(jq -r '"\(.pin_memory) \(.nccl.transport) \(.loaders[1].name) \(.loaders[1].batch_size) \(.loaders[1].workers)"' <<<"$doc")" \
  "pin_memory, nccl.transport and the second loader are in the file"

# validate names it as plan does, by its team's name.
assert_exit 0 "$ctl" profiles validate "$d/profiles"
assert_contains "$IT_OUT" "ok seg/deeplab512 (" "profiles validate names the file seg/deeplab512"

# The package script takes the same --out-dir (it holds seg/).
assert_exit 0 env GPU_RUN_CTL="$ctl" GPU_RUN_PROFILES_MAINTAINER="Seg team <seg@example.org>" \
  "$src/packaging/team-profile-package" -o "$d/out" "$d/profiles" seg 1.0
assert_eq "$d/out/gpu-run-profiles-seg_1.0_all.deb" "$IT_OUT" "team-profile-package packages profiles new's --out-dir"
assert_contains "$(dpkg-deb -c "$d/out/gpu-run-profiles-seg_1.0_all.deb" 2>&1)" "./etc/gpu-run/profiles.d/seg/deeplab512.json" \
  "the package installs seg/deeplab512"

# Copied into a job's repository under another file name, given by its path: it is seg/deeplab512.
mkdir -p "$d/job/configs"
cp "$d/profiles/seg/deeplab512.json" "$d/job/configs/deeplab512.json"
assert_exit 0 "$IT_BIN/gpu-run" --profile "$d/job/configs/deeplab512.json" --gpus 1 --gpu-request none --dry-run img true
assert_contains "$IT_OUT" "GPU_RUN_PROFILE=seg/deeplab512" "gpu-run --profile PATH: the container is told the profile's name"
cp "$d/profiles/seg/deeplab512.json" "$d/job/configs/other.json"
assert_exit 0 "$ctl" plan --profile "$d/job/configs/other.json" --gpus 1
assert_contains "$IT_OUT" "seg/deeplab512" "gpu-run-ctl plan --profile PATH of any file name"
# By name on the search path, the name rule still holds.
assert_exit 2 "$ctl" plan --profile-dir "$d/job/configs" --profile deeplab512 --gpus 1
assert_contains "$IT_ERR" "does not match the file's name" "by name, a file must be found under its name"

it_done
