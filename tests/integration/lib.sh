# shellcheck shell=bash
# Shared helpers for gpu-run's shell integration tests. Source it from a test script:
#
#   source "$(dirname "$0")/lib.sh"
#   it_require_root; it_require_cmd dockerd
#   d=$(it_tmpdir); it_on_exit it_dockerd_stop "$d"; it_dockerd_start "$d"
#   assert_eq 7 "$(...)" "exit code passes through"
#   it_done
#
# Every daemon a test starts is private: its own data root, exec root, socket and pidfile
# under a short directory in /tmp (unix socket paths are limited to ~108 bytes). Nothing here
# talks to a system docker daemon or touches the host's /dev/shm.

# dockerd, runc and friends live in sbin, which a non-login PATH may lack.
case ":$PATH:" in
  *:/usr/sbin:*) ;;
  *) PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin ;;
esac

IT_PASSED=0
IT_FAILED=0
IT_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
IT_CLEANUPS=()
IT_ROOTFS=${IT_ROOTFS:-}

# Drops the engine's own notices from captured output, such as dockerd's "WARNING: IPv4
# forwarding is disabled" on hosts with net.ipv4.ip_forward=0 (the test daemons need no network).
it_drop_engine_warnings() { grep -v '^WARNING: IPv4 forwarding is disabled' || true; }

# Sets IT_TORCH_TARBALL to the PyTorch rootfs tarball ($GPU_RUN_TORCH_TARBALL, else the one
# scripts/torch-rootfs builds once and caches); skips without it. Call it outside $(...).
it_torch_tarball() {
  IT_TORCH_TARBALL=${GPU_RUN_TORCH_TARBALL:-}
  if [[ -z $IT_TORCH_TARBALL ]]; then
    IT_TORCH_TARBALL=$("$(dirname "${BASH_SOURCE[0]}")/../../scripts/torch-rootfs") ||
      it_skip "no PyTorch rootfs (scripts/torch-rootfs failed)"
  fi
  [[ -s $IT_TORCH_TARBALL ]] || it_skip "PyTorch rootfs tarball $IT_TORCH_TARBALL missing"
}

it_log() { printf '[%s] %s\n' "$IT_NAME" "$*" >&2; }

# Exits 77 (ctest's SKIP_RETURN_CODE) with REASON, or fails with it when
# GPU_RUN_REQUIRE_INTEGRATION=1 (CI must run every integration test).
it_skip() {
  if [[ ${GPU_RUN_REQUIRE_INTEGRATION:-0} == 1 ]]; then
    printf '[%s] FAIL: required component missing (GPU_RUN_REQUIRE_INTEGRATION=1): %s\n' "$IT_NAME" "$1" >&2
    exit 1
  fi
  printf '[%s] SKIP: %s\n' "$IT_NAME" "$1" >&2
  exit 77
}

# Aborts the test with MESSAGE: for setup failures after which no check makes sense.
it_die() {
  printf '[%s] FATAL: %s\n' "$IT_NAME" "$*" >&2
  IT_FAILED=$((IT_FAILED + 1))
  exit 1
}

it_require_root() { [[ $(id -u) -eq 0 ]] || it_skip "needs root (runs its own dockerd/podman)"; }

# Skips unless every named command is on PATH.
it_require_cmd() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || it_skip "$c not found on PATH (scripts/install-deps installs it)"
  done
}

# Runs "CMD ARGS..." at exit, last registered first. The test's exit code is kept.
it_on_exit() {
  local quoted
  printf -v quoted '%q ' "$@"
  IT_CLEANUPS+=("$quoted")
}

it__run_cleanups() {
  local rc=$? i
  trap - EXIT
  for ((i = ${#IT_CLEANUPS[@]} - 1; i >= 0; i--)); do
    eval "${IT_CLEANUPS[i]}" || it_log "cleanup failed: ${IT_CLEANUPS[i]}"
  done
  exit "$rc"
}
trap it__run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Prints a new empty directory with a short path under /tmp (unix socket paths must stay
# short). The stop/cleanup functions below remove it.
it_tmpdir() {
  local d
  d=$(mktemp -d /tmp/gr-XXXXXX) || it_die "mktemp failed"
  printf '%s\n' "$d"
}

# it_binaries ARG NAME...: sets IT_BIN, the absolute directory of the binaries under test:
# $GPU_RUN_BIN_DIR, else that of ARG (the path ctest passes), else build/release/bin; skips the
# test when one of NAME... is not built there.
it_binaries() {
  local arg=$1 dir=${GPU_RUN_BIN_DIR:-} name
  shift
  [[ -z $dir && -n $arg ]] && dir=$(dirname "$arg")
  [[ -z $dir ]] && dir=$(dirname "${BASH_SOURCE[0]}")/../../build/release/bin
  for name in "$@"; do
    [[ -x $dir/$name ]] || it_skip "$name not found in $dir (build it, or set GPU_RUN_BIN_DIR)"
  done
  IT_BIN=$(cd "$dir" && pwd)
}

# it_webhook_port STDERR: the port a gpu-run-webhook started with --listen ADDR:0 and its stderr
# in STDERR listens on, once it logs event=listening (waits up to 5 s; fails without one).
it_webhook_port() {
  local port= _
  for _ in $(seq 50); do
    port=$(sed -n 's/.*event=listening .* port=\([0-9]*\).*/\1/p' "$1")
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] && printf '%s\n' "$port"
}

# it_isolate_config WORK [CONFIG_JSON]: the gpu-run config of this test: WORK/config.json holding
# CONFIG_JSON (without it, no host config: the built-in defaults), no user profiles
# (XDG_CONFIG_HOME=WORK/xdg), and none of the caller's GPU_RUN_* requests.
it_isolate_config() {
  local work=$1
  mkdir -p "$work/xdg"
  export XDG_CONFIG_HOME=$work/xdg GPU_RUN_CONFIG=$work/config.json
  if [[ $# -ge 2 ]]; then printf '%s\n' "$2" >"$GPU_RUN_CONFIG"; else GPU_RUN_CONFIG=$work/no-config.json; fi
  unset GPU_RUN_PROFILE_PATH GPU_RUN_PROFILE GPU_RUN_GPUS GPU_RUN_WORKERS GPU_RUN_BATCH_SIZE GPU_RUN_SHM_SIZE \
    GPU_RUN_NUM_WORKERS || true
}

# it_nvidia_standin DIR LOG: writes DIR/nvidia-container-runtime, a stand-in for NVIDIA's runtime
# (its toolkit is not installable here): it appends its argv to LOG, one line a call, and execs
# runc with the same arguments, as nvidia-container-runtime does after editing the spec.
it_nvidia_standin() {
  local dir=$1 log=$2 runc
  runc=$(command -v runc) || it_skip "runc not found on PATH"
  mkdir -p "$dir"
  printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>%q\nexec %q "$@"\n' "$log" "$runc" >"$dir/nvidia-container-runtime"
  chmod 0755 "$dir/nvidia-container-runtime"
}

# ---------------------------------------------------------------------------------------
# Assertions: each prints "ok - MSG" or "FAIL - MSG: details" and counts; none exits.

it_pass() { IT_PASSED=$((IT_PASSED + 1)); printf 'ok - %s\n' "$1"; }
# it_count_checks FILE: prints FILE, the output of checks made elsewhere (a Python script's
# "ok - " and "FAIL - " lines, as k8s_models.check prints them), and counts them.
it_count_checks() {
  cat "$1"
  IT_PASSED=$((IT_PASSED + $(grep -c '^ok - ' "$1")))
  IT_FAILED=$((IT_FAILED + $(grep -c '^FAIL - ' "$1")))
}
it_fail() { IT_FAILED=$((IT_FAILED + 1)); printf 'FAIL - %s\n' "$1"; }

# assert_eq EXPECTED ACTUAL MSG
assert_eq() {
  if [[ $1 == "$2" ]]; then
    it_pass "$3"
  else
    it_fail "$3: expected [$1], got [$2]"
  fi
}

# assert_contains HAYSTACK NEEDLE MSG
assert_contains() {
  if [[ $1 == *"$2"* ]]; then
    it_pass "$3"
  else
    it_fail "$3: [$2] not found in [$1]"
  fi
}

# assert_not_contains HAYSTACK NEEDLE MSG
assert_not_contains() {
  if [[ $1 != *"$2"* ]]; then
    it_pass "$3"
  else
    it_fail "$3: [$2] unexpectedly found in [$1]"
  fi
}

# assert_exit CODE CMD [ARG...]: runs CMD and checks its exit code. Its stdout and stderr
# are kept in IT_OUT and IT_ERR for further checks.
assert_exit() {
  local want=$1 rc=0 out err
  shift
  out=$(mktemp) err=$(mktemp)
  "$@" >"$out" 2>"$err" || rc=$?
  IT_OUT=$(<"$out") IT_ERR=$(<"$err")
  rm -f "$out" "$err"
  if [[ $rc -eq $want ]]; then
    it_pass "exit $want: $*"
  else
    it_fail "exit code of [$*]: expected $want, got $rc; stdout: [$IT_OUT] stderr: [$IT_ERR]"
  fi
}

# Prints "N passed, M failed" and exits non-zero when anything failed.
it_done() {
  printf '%d passed, %d failed\n' "$IT_PASSED" "$IT_FAILED"
  if [[ $IT_FAILED -ne 0 ]]; then exit 1; fi
  if [[ $IT_PASSED -eq 0 ]]; then
    printf '[%s] no check ran\n' "$IT_NAME" >&2
    exit 1
  fi
  exit 0
}

# ---------------------------------------------------------------------------------------
# A gpu-run-ctl guard in the background

# it_guard_setup CTL WORK: the guard the it_guard_* functions start and stop: `CTL guard`, its
# stdout and stderr in WORK/guard.out and WORK/guard.err, its pid in IT_GUARD_PID (empty when
# none runs), killed at exit if it still runs.
it_guard_setup() {
  IT_GUARD_CTL=$1 IT_GUARD_WORK=$2 IT_GUARD_PID=
  it_on_exit it__guard_kill
}
# shellcheck disable=SC2317  # called through it_on_exit
it__guard_kill() { [[ -n $IT_GUARD_PID ]] && kill -KILL "$IT_GUARD_PID" 2>/dev/null; true; }

# it_guard_start ARG...: starts `CTL guard ARG...` in the background (a fresh guard.err) and waits
# until it says it guards.
it_guard_start() {
  rm -f "$IT_GUARD_WORK/guard.err"
  "$IT_GUARD_CTL" guard "$@" >"$IT_GUARD_WORK/guard.out" 2>"$IT_GUARD_WORK/guard.err" &
  IT_GUARD_PID=$!
  it_guard_wait_for "gpu-run-ctl: guard: guarding " "guard started"
}

# it_guard_wait_for TEXT MSG: waits (up to 15 s) until the guard's stderr holds TEXT; fails MSG,
# with that stderr, when it never does.
it_guard_wait_for() {
  local i
  for ((i = 0; i < 150; i++)); do
    grep -qF -- "$1" "$IT_GUARD_WORK/guard.err" 2>/dev/null && return 0
    sleep 0.1
  done
  it_fail "$2: no '$1' in the guard's stderr:"$'\n'"$(cat "$IT_GUARD_WORK/guard.err")"
  return 1
}

# it_guard_stop MSG: sends SIGTERM, checks the guard exits 0 saying it stopped, logs its stderr.
it_guard_stop() {
  kill -TERM "$IT_GUARD_PID"
  local rc=0
  wait "$IT_GUARD_PID" || rc=$?
  IT_GUARD_PID=
  assert_eq 0 "$rc" "$1: SIGTERM ends the guard with exit 0"
  assert_contains "$(cat "$IT_GUARD_WORK/guard.err")" "gpu-run-ctl: guard: stopped" "$1: says it stopped"
  it_log "$1: the guard's stderr:"$'\n'"$(cat "$IT_GUARD_WORK/guard.err")"
}

# ---------------------------------------------------------------------------------------
# Test images

IT_APPLETS=(sh ash df cat dd sleep mount umount ls echo printf grep head tail wc true false
  stat awk sed mkdir rm id env ps test '[' cut tr sort uniq touch cp mv ln chmod hostname
  uname ulimit nproc free du find xargs seq kill date basename dirname readlink realpath which
  tee yes expr)

# Builds a busybox rootfs in DIR (created if missing): static /bin/busybox and applet links,
# the usual mount points and minimal passwd/group files.
it_busybox_rootfs() {
  local dir=$1 bb a
  bb=$(command -v busybox || true)
  [[ -n $bb ]] || it_skip "busybox not found (apt-get install busybox-static)"
  if ! it__is_static "$bb"; then
    if [[ -x /bin/busybox ]] && it__is_static /bin/busybox; then
      bb=/bin/busybox
    else
      it_skip "$bb is not statically linked (apt-get install busybox-static)"
    fi
  fi
  mkdir -p "$dir"/{bin,sbin,dev/shm,proc,sys,tmp,etc,root,run,var/tmp,usr/bin}
  chmod 1777 "$dir/tmp" "$dir/var/tmp"
  cp "$bb" "$dir/bin/busybox"
  local -A have=()
  while read -r a; do have[$a]=1; done < <("$dir/bin/busybox" --list)
  for a in "${IT_APPLETS[@]}"; do
    [[ -n ${have[$a]:-} ]] && ln -sf busybox "$dir/bin/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
  printf 'gpu-run-test\n' >"$dir/etc/hostname"
  : >"$dir/etc/hosts"
  : >"$dir/etc/resolv.conf"
}

# True when the ELF file has no program interpreter (a static executable).
it__is_static() {
  # ldd prints "not a dynamic executable" (exit 1) for static binaries.
  ! ldd "$1" >/dev/null 2>&1
}

# Sets IT_ROOTFS to a busybox rootfs built once per test run (call it outside $(...)).
it_rootfs() {
  local d
  if [[ -z $IT_ROOTFS ]]; then
    d=$(it_tmpdir)
    it_on_exit rm -rf "$d"
    it_busybox_rootfs "$d/rootfs"
    IT_ROOTFS=$d/rootfs
  fi
}

# ---------------------------------------------------------------------------------------
# An isolated dockerd

# Storage driver for test daemons: overlay2 works on these VMs' ext4 root; vfs is the
# fallback that works anywhere (slower, copies each layer).
IT_DOCKER_STORAGE_DRIVER=${IT_DOCKER_STORAGE_DRIVER:-overlay2}

# it_dockerd_start DIR [DAEMON_JSON]: starts a private dockerd whose state lives in DIR and
# exports DOCKER_HOST for it. DAEMON_JSON (a file, e.g. with a "runtimes" entry) is copied to
# DIR/daemon.json; it must not set storage-driver (passed as a flag). The daemon inherits the
# caller's environment (dockerd hands it down to runtimes, e.g. GPU_RUN_CONFIG).
it_dockerd_start() {
  local dir=$1 json=${2:-} sock
  it_require_cmd dockerd containerd runc docker
  mkdir -p "$dir/root"
  # Images and containers in memory: the tests' PyTorch image (900 MB, imported by three tests
  # that run alone) took 15-40 s to import and 25 s to delete on the disk the background builds
  # of scripts/test write to, 6.5 s and nothing on a tmpfs. it_dockerd_stop unmounts it.
  mount -t tmpfs -o mode=0710 tmpfs "$dir/root" || it_die "cannot mount a tmpfs on $dir/root"
  sock=$dir/docker.sock
  ((${#sock} < 100)) || it_die "socket path too long for a unix socket: $sock"
  if [[ -n $json ]]; then
    cp "$json" "$dir/daemon.json" || it_die "cannot copy $json"
  else
    printf '{}\n' >"$dir/daemon.json"
  fi
  # dockerd uses a running system containerd when its socket exists; start a private one
  # instead so that nothing is shared with the host's engine.
  if [[ -S /run/containerd/containerd.sock || ${IT_PRIVATE_CONTAINERD:-0} == 1 ]]; then
    it__containerd_start "$dir"
  fi
  # The CLI talks to this daemon only: no user context, no ~/.docker.
  export DOCKER_HOST=unix://$sock
  export DOCKER_CONFIG=$dir/cli
  mkdir -p "$DOCKER_CONFIG" && printf '{}\n' >"$DOCKER_CONFIG/config.json"
  unset DOCKER_CONTEXT DOCKER_TLS_VERIFY DOCKER_CERT_PATH || true
  it__dockerd_launch "$dir"
}

# Starts dockerd on DIR's state (it_dockerd_start made it) and waits until it answers.
it__dockerd_launch() {
  local dir=$1 pid i
  local args=(--data-root "$dir/root" --exec-root "$dir/exec" --pidfile "$dir/pid"
    -H "unix://$dir/docker.sock" --bridge none --iptables=false --ip-masq=false --ip-forward=false
    --storage-driver "$IT_DOCKER_STORAGE_DRIVER" --config-file "$dir/daemon.json")
  [[ -f $dir/ctd/pid ]] && args+=(--containerd "$dir/ctd.sock")
  dockerd "${args[@]}" >>"$dir/dockerd.log" 2>&1 </dev/null &
  pid=$!
  printf '%s\n' "$pid" >"$dir/dockerd.launch-pid"
  for ((i = 0; i < 120; i++)); do
    if DOCKER_HOST=unix://$dir/docker.sock docker info >/dev/null 2>&1; then
      it_log "dockerd pid $pid up (storage $IT_DOCKER_STORAGE_DRIVER, DOCKER_HOST=unix://$dir/docker.sock)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.5
  done
  it_log "dockerd did not come up; its log:"
  tail -n 40 "$dir/dockerd.log" >&2
  it_die "isolated dockerd failed to start (state in $dir)"
}

# it_prometheus_start DIR TARGET: Debian's prometheus scraping TARGET (host:port) every second,
# its config, data and log under DIR; prints its HTTP port. The caller stops it (its pid in
# DIR/prometheus.pid).
it_prometheus_start() {
  local dir=$1 target=$2 port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpu-run-guard\n    static_configs:\n      - targets: ["%s"]\n' \
    "$target" >"$dir/prometheus.yml"
  promtool check config "$dir/prometheus.yml" >/dev/null 2>&1 || it_die "promtool check config rejected $dir/prometheus.yml"
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
  printf '%s\n' "$!" >"$dir/prometheus.pid"
  printf '%s\n' "$port"
}

# it_prometheus_value PORT QUERY: the first value Prometheus on PORT answers for QUERY through
# its HTTP API, asked every 0.5 s for up to 30 s; empty when it answers none.
it_prometheus_value() {
  local port=$1 query=$2 value= i
  for ((i = 0; i < 60; i++)); do
    value=$(curl -s -G "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$query" 2>/dev/null |
      python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true)
    [[ -n $value ]] && break
    sleep 0.5
  done
  printf '%s\n' "$value"
}

# it_package_build CPACK_CONFIG: sets IT_PACKAGE_BUILD, the build the image tests take their .debs
# from: the build under test ($GPU_RUN_BIN_DIR/..) when it is a Release build for /usr with
# CPACK_CONFIG (CPackWebhookConfig.cmake, ...), else scripts/package into
# $GPU_RUN_PACKAGE_BUILD_DIR (default build/pkg).
it_package_build() {
  local src tested
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  tested=${GPU_RUN_BIN_DIR:+$(dirname "$GPU_RUN_BIN_DIR")}
  if [[ -n $tested && -f $tested/$1 ]] &&
    grep -qx 'CMAKE_INSTALL_PREFIX:PATH=/usr' "$tested/CMakeCache.txt" &&
    grep -qx 'CMAKE_BUILD_TYPE:STRING=Release' "$tested/CMakeCache.txt"; then
    IT_PACKAGE_BUILD=$tested
  else
    IT_PACKAGE_BUILD=${GPU_RUN_PACKAGE_BUILD_DIR:-$src/build/pkg}
    it_log "building the packages (scripts/package $IT_PACKAGE_BUILD)"
    GPU_RUN_PACKAGE_GENERATORS=DEB "$src/scripts/package" "$IT_PACKAGE_BUILD" >/dev/null || it_die "scripts/package failed"
  fi
  it_log "packages from $IT_PACKAGE_BUILD"
}

# it_dockerd_restart DIR: stops the dockerd of it_dockerd_start DIR (SIGTERM, as systemctl
# restart does; its containers stop with it, there is no live-restore) and starts it again on the
# same state.
it_dockerd_restart() {
  local dir=$1
  it__stop_pid "$(cat "$dir/pid" 2>/dev/null || cat "$dir/dockerd.launch-pid")" 30
  it__dockerd_launch "$dir"
}

# it_containerd_restart DIR: stops the private containerd under it_dockerd_start DIR (SIGTERM)
# and starts it again on the same state; dockerd reconnects to it.
it_containerd_restart() {
  local dir=$1
  [[ -f $dir/ctd/pid ]] || it_die "no private containerd under $dir (IT_PRIVATE_CONTAINERD=1)"
  it__stop_pid "$(cat "$dir/ctd/pid")" 15
  rm -f "$dir/ctd.sock"
  it__containerd_start "$dir"
}

it__containerd_start() {
  local dir=$1 i
  mkdir -p "$dir/ctd"
  cat >"$dir/ctd/config.toml" <<EOF
version = 2
root = "$dir/ctd/root"
state = "$dir/ctd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$dir/ctd.sock"
[ttrpc]
  address = "$dir/ctd.sock.ttrpc"
[debug]
  address = ""
EOF
  containerd --config "$dir/ctd/config.toml" >"$dir/ctd/log" 2>&1 </dev/null &
  printf '%s\n' "$!" >"$dir/ctd/pid"
  for ((i = 0; i < 60; i++)); do
    [[ -S $dir/ctd.sock ]] && return 0
    sleep 0.5
  done
  tail -n 40 "$dir/ctd/log" >&2
  it_die "private containerd failed to start (state in $dir/ctd)"
}

# Sends SIGTERM to PID, waits up to SECS, then SIGKILL.
it__stop_pid() {
  local pid=$1 secs=${2:-30} i
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  it_log "pid $pid ignored SIGTERM for ${secs}s, killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# Unmounts everything mounted at or below DIR, deepest first.
it_umount_below() {
  local dir=$1 m
  # /proc/self/mounts escapes spaces as \040; test directories have none.
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
}

# it_dockerd_stop DIR: removes the daemon's containers, stops it (and a private containerd),
# unmounts what is left under DIR and removes DIR.
it_dockerd_stop() {
  local dir=$1 pid ids
  [[ -d $dir ]] || return 0
  if [[ -S $dir/docker.sock ]]; then
    ids=$(DOCKER_HOST=unix://$dir/docker.sock docker ps -aq 2>/dev/null || true)
    if [[ -n $ids ]]; then
      # shellcheck disable=SC2086
      DOCKER_HOST=unix://$dir/docker.sock docker rm -f $ids >/dev/null 2>&1 || true
    fi
  fi
  pid=$(cat "$dir/pid" 2>/dev/null || cat "$dir/dockerd.launch-pid" 2>/dev/null || true)
  it__stop_pid "$pid" 30
  [[ -f $dir/ctd/pid ]] && it__stop_pid "$(cat "$dir/ctd/pid")" 15
  it_umount_below "$dir"
  rm -rf "$dir" 2>/dev/null || { sleep 1; it_umount_below "$dir"; rm -rf "$dir"; } ||
    it_log "could not remove $dir"
}

# it_docker_image NAME: imports the busybox rootfs as image NAME into $DOCKER_HOST.
it_docker_image() {
  it_rootfs
  tar -C "$IT_ROOTFS" -c . | docker import - "$1" >/dev/null || it_die "docker import $1 failed"
}

# Prints the number of containers (running or not) the current engine knows.
it_docker_count() { docker ps -aq | wc -l; }

# ---------------------------------------------------------------------------------------
# An isolated podman

# Storage driver for test podman stores: native overlay as root on ext4; vfs as fallback.
IT_PODMAN_STORAGE_DRIVER=${IT_PODMAN_STORAGE_DRIVER:-overlay}

# it_podman_env DIR: writes storage.conf and containers.conf into DIR and exports
# CONTAINERS_CONF / CONTAINERS_STORAGE_CONF so that every podman call of the test uses
# DIR for images, containers, locks (file locks, not the host's /dev/shm), events and tmp,
# runc, cgroupfs, no network, and rlimits within this machine's hard limits.
it_podman_env() {
  local dir=$1
  it_require_cmd podman runc conmon
  mkdir -p "$dir"/{root,run,tmp,volumes}
  cat >"$dir/storage.conf" <<EOF
[storage]
driver = "$IT_PODMAN_STORAGE_DRIVER"
graphroot = "$dir/root"
runroot = "$dir/run"
EOF
  cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=1024:1024"]
netns = "none"
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$dir/events.log"
lock_type = "file"
tmp_dir = "$dir/tmp"
volume_path = "$dir/volumes"
static_dir = "$dir/root/libpod"
EOF
  export CONTAINERS_CONF=$dir/containers.conf
  export CONTAINERS_STORAGE_CONF=$dir/storage.conf
  if ! podman info >"$dir/info.log" 2>&1; then
    cat "$dir/info.log" >&2
    it_die "podman info failed with the test configuration in $dir"
  fi
  it_log "podman store in $dir (storage $IT_PODMAN_STORAGE_DRIVER, runtime runc)"
}

# it_podman_image NAME: imports the busybox rootfs as image NAME into the test store.
it_podman_image() {
  it_rootfs
  tar -C "$IT_ROOTFS" -c . | podman import -q - "$1" >/dev/null || it_die "podman import $1 failed"
}

it_podman_count() { podman ps -aq | wc -l; }

# it_podman_cleanup DIR: removes the test store's containers, unmounts what is left under
# DIR and removes DIR.
it_podman_cleanup() {
  local dir=$1
  [[ -d $dir ]] || return 0
  if [[ -f $dir/containers.conf ]]; then
    CONTAINERS_CONF=$dir/containers.conf CONTAINERS_STORAGE_CONF=$dir/storage.conf \
      podman rm -af -t 0 >/dev/null 2>&1 || true
  fi
  it_umount_below "$dir"
  rm -rf "$dir" 2>/dev/null || { sleep 1; it_umount_below "$dir"; rm -rf "$dir"; } ||
    it_log "could not remove $dir"
}
