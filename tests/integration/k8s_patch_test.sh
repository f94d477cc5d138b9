#!/usr/bin/env bash
# gpu-run-ctl k8s: its patch merged by `kubectl patch --local` into a pod whose container is not
# named `main` changes that container and never adds one; without --container it is refused.
# Usage: k8s_patch_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl next to it, or in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd kubectl jq
it_binaries "${1:-}" gpu-run-ctl
work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_isolate_config "$work"

cat >"$work/pod.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  containers:
    - name: pytorch
      image: pytorch/pytorch
      command: ["python", "train.py"]
EOF

assert_exit 2 "$IT_BIN/gpu-run-ctl" k8s --profile imagenet --gpus 2 --cpus 16 --format json
assert_contains "$IT_ERR" "--container is required" "no --container: refused, with what to do"
assert_eq "" "$IT_OUT" "no --container: no patch printed"

assert_exit 0 "$IT_BIN/gpu-run-ctl" k8s --profile imagenet --gpus 2 --cpus 16 --container pytorch --format json
patch=$IT_OUT
merged=$(kubectl patch --local -f "$work/pod.yaml" -p "$patch" -o json 2>&1)
assert_eq 0 "$?" "kubectl patch --local merges the patch"
assert_eq "pytorch" "$(jq -r '[.spec.containers[].name] | join(",")' <<<"$merged")" \
  "the pod still has one container, the one named"
assert_eq "pytorch/pytorch" "$(jq -r '.spec.containers[0].image' <<<"$merged")" "its image is kept"
assert_eq "imagenet,2" \
  "$(jq -r '.spec.containers[0].env | map(select(.name == "GPU_RUN_PROFILE" or .name == "GPU_RUN_GPUS").value) | join(",")' <<<"$merged")" \
  "its env has the profile and the GPU count"
assert_eq "/dev/shm" "$(jq -r '.spec.containers[0].volumeMounts[0].mountPath' <<<"$merged")" \
  "/dev/shm is mounted in it"
assert_eq "2" "$(jq -r '.spec.containers[0].resources.limits["nvidia.com/gpu"]' <<<"$merged")" "its GPU limit is set"
assert_eq "Memory" "$(jq -r '.spec.volumes[0].emptyDir.medium' <<<"$merged")" "the emptyDir is memory-backed"

it_done
