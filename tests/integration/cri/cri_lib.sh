# shellcheck shell=bash
# A private containerd with its CRI plugin, for cri_test.sh and bench/cri/run. Source after
# tests/integration/lib.sh. Everything lives under one directory from it_tmpdir: root, state,
# sockets, config, the CNI dirs (empty: pods use host networking) and the pod shm tmpfs
# containerd mounts under its state; nothing talks to a system containerd.

IT_CRI_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IT_CRI_IMAGE=docker.io/gpurun/busybox:test
IT_CRI_PYTHON=${IT_CRI_PYTHON:-/usr/bin/python3}
IT_CRI_SNAPSHOTTER=${IT_CRI_SNAPSHOTTER:-overlayfs}

# it_cri_config DIR: writes DIR/config.toml, the base config: CRI with host-network pods, the
# busybox image as sandbox image, the runc handler. Runtime handlers are added to it after.
it_cri_config() {
  local dir=$1
  mkdir -p "$dir/cni/bin" "$dir/cni/conf"
  cat >"$dir/config.toml" <<EOT
version = 2
root = "$dir/root"
state = "$dir/state"

[grpc]
  address = "$dir/ctd.sock"

[ttrpc]
  address = "$dir/ctd.sock.ttrpc"

[debug]
  address = ""
  level = "info"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$IT_CRI_IMAGE"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # This machine may itself be a container without CAP_SYS_RESOURCE: the kubelet-like
    # oom_score_adj of -998 for sandboxes would fail runc.
    restrict_oom_score_adj = true

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$dir/cni/bin"
      conf_dir = "$dir/cni/conf"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "$IT_CRI_SNAPSHOTTER"
      default_runtime_name = "runc"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
EOT
}

# it_cri_handler DIR BIN: adds the runtime handler "gpu-run" (BIN/gpu-run-runtime) to
# DIR/config.toml as an admin would: gpu-run-ctl configure containerd.
it_cri_handler() {
  local dir=$1 bin=$2
  "$bin/gpu-run-ctl" configure containerd --containerd-config "$dir/config.toml" --runtime-path "$bin/gpu-run-runtime" \
    >"$dir/configure.out" 2>&1 || { cat "$dir/configure.out" >&2; it_die "gpu-run-ctl configure containerd failed"; }
}

# it_cri_start DIR: starts containerd on DIR/config.toml and waits for its CRI socket.
it_cri_start() {
  local dir=$1 i
  it_require_cmd containerd ctr runc
  [[ -x $IT_CRI_PYTHON ]] || it_skip "$IT_CRI_PYTHON not found"
  "$IT_CRI_PYTHON" -c 'import grpc, grpc_tools' 2>/dev/null ||
    it_skip "python3-grpcio / python3-grpc-tools missing (scripts/install-deps installs them)"
  containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 </dev/null &
  printf '%s\n' "$!" >"$dir/containerd.pid"
  for ((i = 0; i < 120; i++)); do
    if [[ -S $dir/ctd.sock ]] && it_cri version >/dev/null 2>&1; then return 0; fi
    kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 30 "$dir/containerd.log" >&2
  it_die "private containerd with CRI failed to start (state in $dir)"
}

# it_cri ARGS...: the CRI client against the private containerd ($IT_CRI_SOCK).
it_cri() { "$IT_CRI_PYTHON" "$IT_CRI_DIR/cri_client.py" "$IT_CRI_SOCK" "$@"; }

# it_cri_image DIR: the busybox rootfs ($IT_ROOTFS) as a docker-archive tarball imported as
# $IT_CRI_IMAGE into the k8s.io namespace (no registry involved).
it_cri_image() {
  local dir=$1 a=$1/image layer_sha config_sha
  mkdir -p "$a"
  tar -C "$IT_ROOTFS" -cf "$a/layer.tar" . || it_die "cannot tar $IT_ROOTFS"
  layer_sha=$(sha256sum "$a/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"%s","os":"linux","config":{"Cmd":["/bin/sleep","1000000"],"Env":["PATH=/bin:/sbin:/usr/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$(dpkg --print-architecture 2>/dev/null || echo amd64)" "$layer_sha" >"$a/config.json"
  config_sha=$(sha256sum "$a/config.json" | cut -d' ' -f1)
  mv "$a/config.json" "$a/$config_sha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$config_sha" "${IT_CRI_IMAGE#docker.io/}" \
    >"$a/manifest.json"
  tar -C "$a" -cf "$dir/image.tar" manifest.json "$config_sha.json" layer.tar || it_die "cannot write image.tar"
  rm -rf "$a"
  ctr -a "$IT_CRI_SOCK" -n k8s.io images import --snapshotter "$IT_CRI_SNAPSHOTTER" "$dir/image.tar" >/dev/null ||
    it_die "ctr images import failed"
}

# it_cri_stop DIR: removes every pod, stops containerd, unmounts what is left under DIR
# (the pods' shm tmpfs, rootfs overlays) and removes DIR.
it_cri_stop() {
  local dir=$1 pid
  [[ -d $dir ]] || return 0
  if [[ -S $dir/ctd.sock ]]; then
    local pods
    pods=$(ctr -a "$dir/ctd.sock" -n k8s.io containers ls -q 2>/dev/null || true)
    for pid in $pods; do
      ctr -a "$dir/ctd.sock" -n k8s.io tasks kill -s KILL "$pid" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for pid in $pods; do
      ctr -a "$dir/ctd.sock" -n k8s.io tasks delete -f "$pid" >/dev/null 2>&1 || true
    done
  fi
  it__stop_pid "$(cat "$dir/containerd.pid" 2>/dev/null || true)" 20
  it_umount_below "$dir"
  rm -rf "$dir" 2>/dev/null || { sleep 1; it_umount_below "$dir"; rm -rf "$dir"; } || it_log "could not remove $dir"
}
