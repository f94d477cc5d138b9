#!/usr/bin/env bash
# Every shown run of README.md and docs/*.md that a test machine can run, run as the page shows it
# and its output compared with the page: scripts/check-docs --engines, with a private dockerd (and
# its containerd), the busybox image the pages call `img`, the PyTorch image of scripts/torch-rootfs
# as `gpurun-torch` and `pytorch/pytorch`, the programs under test first on PATH, and a private
# mount namespace whose /etc/docker, /etc/containerd and /var/log are empty tmpfs and whose /usr/local
# is an overlay (the pages' `configure` runs, NVIDIA's toolkit path and the host log, with nothing
# of the host's changed). It starts node guards (one a host): it runs alone. What check-docs runs
# before a run (a container the prose describes) is its SETUP table.
# Usage: docs_runs_test.sh [PATH/TO/gpu-run]   (the other programs from the same directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd dockerd containerd runc docker jq curl unshare python3
it_binaries "${1:-}" gpu-run gpu-run-ctl gpu-run-hook gpu-run-runtime gpu-run-webhook
it_torch_tarball

work=$(it_tmpdir)
it_on_exit rm -rf "$work"
it_isolate_config "$work"
unset LANG LC_ALL LC_CTYPE || true

d=$(it_tmpdir)
it_on_exit it_dockerd_stop "$d"
IT_PRIVATE_CONTAINERD=1 it_dockerd_start "$d"
t0=$SECONDS
docker import "$IT_TORCH_TARBALL" gpurun-torch >/dev/null || it_die "docker import $IT_TORCH_TARBALL failed"
docker tag gpurun-torch pytorch/pytorch || it_die "docker tag failed"
it_docker_image img
it_log "images gpurun-torch, pytorch/pytorch and img made in $((SECONDS - t0))s"

# The pages were run on a 2-CPU machine: the automatic worker counts they show are for 2 CPUs.
pin=()
if [[ $(nproc) -gt 2 ]] && command -v taskset >/dev/null; then pin=(taskset -c "0,1"); fi

# doctor.md's daemon.json is at a path of its own in /tmp.
rm -rf /tmp/chainx
it_on_exit rm -rf /tmp/chainx

t0=$SECONDS
rc=0
# shellcheck disable=SC2016  # expanded by the inner bash
"${pin[@]}" unshare --mount --propagation private bash -c '
  set -e
  for dir in /etc/docker /etc/containerd /var/log; do
    [[ -d $dir ]] || { echo "no $dir on this host" >&2; exit 1; }
    mount -t tmpfs -o mode=0755 tmpfs "$dir"
  done
  mkdir -p "$3/upper" "$3/work"
  mount -t overlay overlay -o "lowerdir=/usr/local,upperdir=$3/upper,workdir=$3/work" /usr/local
  exec python3 "$1/scripts/check-docs" --engines "$2"' _ "$here/../.." "$IT_BIN" "$work/usr-local" \
  >"$work/check-docs.out" 2>&1 || rc=$?
it_log "check-docs --engines ran in $((SECONDS - t0))s"
cat "$work/check-docs.out"
assert_eq 0 "$rc" "scripts/check-docs --engines: every shown run prints what its page shows"

summary=$(grep -o '([0-9]* runs run; [0-9]* left to what no test machine has' "$work/check-docs.out" || true)
ran=$(sed -n 's/^(\([0-9]*\) runs run.*/\1/p' <<<"$summary")
left=$(sed -n 's/.*runs run; \([0-9]*\) left.*/\1/p' <<<"$summary")
if [[ -n $ran && $ran -ge 30 ]]; then it_pass "$ran shown runs run (at least 30)"; else it_fail "shown runs run: [$ran], at least 30 expected"; fi
if [[ -n $left && $left -le 8 ]]; then it_pass "$left shown runs left to a cluster, a GPU or a registry (at most 8)"; else it_fail "shown runs left: [$left], at most 8 expected"; fi
it_done
