#!/usr/bin/env bash
# A team's profile from its first line to a package and a job, as docs/profiles-and-sizing.md
# tells it: `profiles new TEAM/NAME --out-dir DIR`, `profiles validate DIR`,
# packaging/team-profile-package on that same DIR (the .deb, and with --config-map the cluster's
# ConfigMap, the one `k8s webhook-manifests --profiles DIR` prints), and the file copied into a
# job's repository and given to gpu-run by its path. The built binaries; no daemon (gpu-run --dry-run).
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

# The same profiles for a cluster (issue 40): --config-map prints the ConfigMap gpu-run-profiles,
# the very document the manifests print with --profiles of that DIR, and builds nothing.
# The document of a YAML stream on stdin that is the ConfigMap gpu-run-profiles.
profiles_doc() {
  awk '/^---$/ { if (doc ~ /\nkind: "ConfigMap"\n/ && doc ~ /\n  name: "gpu-run-profiles"\n/) printf "%s", doc; doc = "" }
       { doc = doc "\n" $0 }
       END { if (doc ~ /\nkind: "ConfigMap"\n/ && doc ~ /\n  name: "gpu-run-profiles"\n/) printf "%s", doc }'
}
ls_out=$(ls -A "$d/out")
assert_exit 0 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --config-map "$d/profiles" seg
cm=$IT_OUT
assert_contains "$cm" 'seg__deeplab512.json: "{' "--config-map: the team's profile under its ConfigMap key"
assert_contains "$cm" 'namespace: "gpu-run"' "--config-map: the webhook's namespace by default"
assert_eq "$ls_out" "$(ls -A "$d/out")" "--config-map builds no package"
assert_exit 0 "$ctl" k8s profiles-configmap --profiles "$d/profiles"
assert_eq "$IT_OUT" "$cm" "--config-map prints what gpu-run-ctl k8s profiles-configmap prints for the same tree"
assert_exit 0 "$ctl" k8s webhook-manifests --cert-manager --profiles "$d/profiles"
webhook_doc=$(profiles_doc <<<"$IT_OUT")
assert_contains "$webhook_doc" "seg__deeplab512.json" "webhook-manifests --profiles holds the ConfigMap"
assert_eq "$webhook_doc" "$(profiles_doc <<<"$cm")" "--config-map: the ConfigMap webhook-manifests --profiles prints, byte for byte"
assert_contains "$IT_OUT" '- key: "seg__deeplab512.json"
                path: "seg/deeplab512.json"' "the Deployment's volume puts the key back at seg/deeplab512.json"
assert_exit 0 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --config-map --server guard \
  --namespace ml-guard --label release=prom "$d/profiles" seg
cm=$IT_OUT
assert_exit 0 "$ctl" k8s guard-manifests --namespace ml-guard --label release=prom --profiles "$d/profiles"
assert_contains "$(profiles_doc <<<"$cm")" 'release: "prom"' "--config-map --label labels the ConfigMap"
assert_eq "$(profiles_doc <<<"$IT_OUT")" "$(profiles_doc <<<"$cm")" \
  "--config-map --server guard --namespace --label: the ConfigMap guard-manifests prints with the same flags"

# Bad input: one line naming the file, nothing printed on stdout, and nothing built.
mkdir -p "$d/bad" "$d/misnamed"
printf '{"name": "seg/typo", "batch_szie": 8}\n' >"$d/bad/typo.json"
assert_exit 1 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --config-map "$d/bad" seg
assert_contains "$IT_ERR" "$d/bad/typo.json: key 'batch_szie'" "--config-map refuses a file that is not a valid profile, naming it"
assert_contains "$IT_ERR" "team-profile-package: the profiles in $d/bad are not valid (see above); nothing was printed" \
  "--config-map says nothing was printed"
assert_eq "" "$IT_OUT" "--config-map prints no ConfigMap for an invalid profile"
cp "$d/profiles/seg/deeplab512.json" "$d/misnamed/deeplab.json"
assert_exit 1 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --config-map "$d/misnamed" seg
assert_contains "$IT_ERR" "$d/misnamed/deeplab.json: key 'name': 'seg/deeplab512' does not match the file's name, which makes it 'seg/deeplab'" \
  "--config-map refuses a name that does not match its path, naming the file"
assert_eq "" "$IT_OUT" "--config-map prints no ConfigMap for a misnamed profile"
assert_exit 2 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --config-map -o "$d/out" "$d/profiles" seg
assert_contains "$IT_ERR" "-o and VERSION are the .deb's only" "--config-map with -o is refused"
assert_exit 2 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --namespace ml "$d/profiles" seg 1.1
assert_contains "$IT_ERR" "--namespace is the ConfigMap's: add --config-map" "--namespace without --config-map is refused"
assert_exit 2 env GPU_RUN_CTL="$ctl" "$src/packaging/team-profile-package" --config-map --server daemonset "$d/profiles" seg
assert_contains "$IT_ERR" "--server 'daemonset': expected webhook or guard" "--config-map --server: gpu-run-ctl's one line"
assert_eq "" "$IT_OUT" "--config-map prints nothing for a bad --server"
assert_eq "$ls_out" "$(ls -A "$d/out")" "no bad input built a package"

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
