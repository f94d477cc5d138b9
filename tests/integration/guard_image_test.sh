#!/usr/bin/env bash
# The node guard's image (packaging/guard/build-image, FROM scratch over the project's .debs),
# built in an isolated dockerd and run with exactly what the DaemonSet of `gpu-run-ctl k8s
# guard-manifests` gives it, translated to docker run flags (hostPID, the four capabilities and no
# other, runAsUser 0, a read-only root, seccomp RuntimeDefault, its host paths: the private
# containerd's task directory read-only and HostToContainer, a /run/gpu-run of the test's own, the
# host's /dev/shm read-only; its env and args). It watches that containerd, where a pod's container
# (a k8s.io task with the CRI annotations, run by ctr) fills its 64 MiB /dev/shm: the guard grows
# it, serves the growth and answers the DaemonSet's probes (/healthz, /readyz) on the metrics port,
# and leaves the host's /dev/shm alone. Then the same run without each of the four capabilities in
# turn: the /dev/shm is not grown, so each is needed.
# The guards run with a /run/gpu-run of their own (the host's guard.lock is never taken).
# Packages: the build under test ($GPU_RUN_BIN_DIR/..) when it is a Release build for /usr, else
# scripts/package into $GPU_RUN_PACKAGE_BUILD_DIR (default build/pkg), as webhook_image does.
source "$(dirname "$0")/lib.sh"
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
it_require_root
it_require_cmd dpkg-deb cpack readelf ctr curl
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import yaml' 2>/dev/null || it_skip "python3-yaml is needed (scripts/install-deps installs it)"
it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl
quiet() { "$@" >/dev/null 2>&1 || true; }

d=$(it_tmpdir)
it_on_exit rm -rf --one-file-system "$d"
it_on_exit it_dockerd_stop "$d/docker"

it_package_build CPackMetricsConfig.cmake
build=$IT_PACKAGE_BUILD

# The private containerd's state is a shared mount of its own, so that the DaemonSet's
# HostToContainer (docker's rslave) can be given as it is: this machine's / is a private mount.
state=$d/docker/ctd/state
mkdir -p "$state"
mount --bind "$state" "$state" && mount --make-rshared "$state" || it_die "cannot make $state a shared mount"
IT_PRIVATE_CONTAINERD=1 it_dockerd_start "$d/docker"
CTR=(ctr -a "$d/docker/ctd.sock" -n k8s.io)

tag=gpu-run-guard-it:$$
it_on_exit quiet docker rmi -f "$tag"
out=$("$src/packaging/guard/build-image" --build-dir "$build" --tag "$tag" 2>&1)
assert_eq 0 "$?" "build-image builds the image offline ($(tail -n 3 <<<"$out"))"
assert_eq "$tag" "$(tail -n 1 <<<"$out")" "build-image prints the tag"
assert_eq "0:0" "$(docker image inspect -f '{{.Config.User}}' "$tag")" "the image's user is root, numeric"
files=$(docker create "$tag" >"$d/cid" 2>/dev/null && docker export "$(cat "$d/cid")" | tar -t | sort)
docker rm -f "$(cat "$d/cid")" >/dev/null
assert_contains "$files" "usr/bin/gpu-run-ctl" "the image holds gpu-run-ctl from the .deb"
assert_contains "$files" "usr/bin/gpu-run-hook" "...gpu-run-hook, the remount helper"
assert_contains "$files" "usr/lib/gpu-run/gpu-run-metrics-http.so" "...the metrics server module"
assert_contains "$files" "usr/share/gpu-run/profiles/imagenet.json" "...and the built-in profiles"
assert_not_contains "$files" "bin/sh" "...and no shell"
it_log "image $tag: $(wc -l <<<"$files") files"

# The DaemonSet as docker run flags. Anything in it this translation does not know fails the test,
# so a privilege added to the manifests is either tried here or noticed.
port=$((20000 + RANDOM % 20000))
"$CTL" k8s guard-manifests --image "$tag" --port "$port" --containerd-state "$state" >"$d/guard.yaml" ||
  it_die "guard-manifests failed"
mkdir -p "$d/run-gpu-run"
cat >"$d/flags.py" <<'PYEOF'
import sys
import yaml

path, run_dir, without = sys.argv[1], sys.argv[2], sys.argv[3]
ds = [o for o in yaml.safe_load_all(open(path)) if o["kind"] == "DaemonSet"][0]
tmpl = ds["spec"]["template"]
pod = tmpl["spec"]
c, = pod["containers"]
sc = c["securityContext"]
# affinity says where the pod lands (GPU nodes), nothing the container runs with
known_pod = {"affinity", "hostPID", "automountServiceAccountToken", "priorityClassName", "terminationGracePeriodSeconds",
             "tolerations", "containers", "volumes"}
known_sc = {"privileged", "readOnlyRootFilesystem", "runAsUser", "capabilities", "seccompProfile"}
assert set(pod) <= known_pod, "pod spec: %s" % (set(pod) - known_pod)
assert set(sc) <= known_sc, "securityContext: %s" % (set(sc) - known_sc)
assert set(tmpl["metadata"].get("annotations", {})) <= {"container.apparmor.security.beta.kubernetes.io/guard"}
assert sc["privileged"] is False and sc["seccompProfile"]["type"] == "RuntimeDefault" and sc["capabilities"]["drop"] == ["ALL"]
flags = ["--network", "host", "--user", str(sc["runAsUser"]), "--cap-drop", "ALL", "--security-opt", "apparmor=unconfined"]
if pod.get("hostPID"):
    flags += ["--pid", "host"]
if sc.get("readOnlyRootFilesystem"):
    flags += ["--read-only"]
for cap in sc["capabilities"]["add"]:
    if cap != without:
        flags += ["--cap-add", cap]
volumes = {v["name"]: v for v in pod["volumes"]}
for m in c["volumeMounts"]:
    v = volumes[m["name"]]
    if "configMap" in v:
        assert v["configMap"]["optional"] is True
        continue  # optional ConfigMaps, absent here
    host = v["hostPath"]["path"]
    if host == "/run/gpu-run":
        host = run_dir  # the test's own: the host's guard.lock is not taken
    opts = ["ro"] if m.get("readOnly") else []
    if m.get("mountPropagation") == "HostToContainer":
        opts.append("rslave")
    else:
        assert "mountPropagation" not in m
    flags += ["-v", host + ":" + m["mountPath"] + (":" + ",".join(opts) if opts else "")]
for e in c.get("env", []):
    flags += ["-e", e["name"] + "=" + e["value"]]
flags.append(c["image"])
flags += c["args"]
print("\n".join(flags))
PYEOF

# run_guard NAME [CAPABILITY-LEFT-OUT]: the DaemonSet's container as NAME.
run_guard() {
  local flags
  mapfile -t flags < <("$PY" "$d/flags.py" "$d/guard.yaml" "$d/run-gpu-run" "${2:-none}") ||
    it_die "the DaemonSet has something this test cannot translate: $("$PY" "$d/flags.py" "$d/guard.yaml" "$d/run-gpu-run" none 2>&1 | tail -n 1)"
  ((${#flags[@]} > 4)) || it_die "no docker flags from the DaemonSet"
  it_on_exit quiet docker rm -f "$1"
  docker run -d --name "$1" "${flags[@]}" >/dev/null 2>"$d/run.err" || it_die "docker run $1: $(cat "$d/run.err")"
}
# start_pod ID: a pod's container as containerd's CRI plugin starts one (its annotations), its
# /dev/shm the 64 MiB tmpfs of ctr's spec; sets POD_PID.
start_pod() {
  it_on_exit stop_pod "$1"
  "${CTR[@]}" run -d --annotation io.kubernetes.cri.container-type=container \
    --annotation io.kubernetes.cri.container-name=c0 --annotation io.kubernetes.cri.sandbox-name="$1" \
    --annotation io.kubernetes.cri.sandbox-namespace=ml --annotation gpu-run.shm-size=64m \
    --rootfs "$IT_ROOTFS" "$1" /bin/sleep 600 \
    >/dev/null 2>"$d/ctr.err" || it_die "ctr run $1: $(cat "$d/ctr.err")"
  POD_PID=$(cat "$state/io.containerd.runtime.v2.task/k8s.io/$1/init.pid")
}
stop_pod() {
  "${CTR[@]}" task rm -f "$1" >/dev/null 2>&1
  "${CTR[@]}" container rm "$1" >/dev/null 2>&1
  true
}
# wait_log NAME TEXT: true once docker logs NAME has TEXT (10 s at most).
wait_log() {
  local i
  for ((i = 0; i < 100; i++)); do
    docker logs "$1" 2>&1 | grep -qF -- "$2" && return 0
    sleep 0.1
  done
  return 1
}
shm_size() { stat -f -c '%b %S' "/proc/$1/root/dev/shm" | awk '{print $1 * $2}'; }

it_rootfs
host_shm_before=$(stat -f -c '%b %S' /dev/shm)

start_pod train
pid=$POD_PID
assert_eq 67108864 "$(shm_size "$pid")" "the pod's container has a 64 MiB /dev/shm"
run_guard gr-guard-$$
wait_log gr-guard-$$ "guarding container c0"
assert_eq 0 "$?" "the guard in the DaemonSet's container guards the pod ($(docker logs gr-guard-$$ 2>&1 | tail -n 2 | tr '\n' ' '))"
dd if=/dev/zero of="/proc/$pid/root/dev/shm/fill" bs=1M count=56 2>/dev/null
wait_log gr-guard-$$ "/dev/shm 64MiB -> "
assert_eq 0 "$?" "...and grows its /dev/shm as 56 MiB are written into its 64 ($(docker logs gr-guard-$$ 2>&1 | tail -n 1))"
size=$(shm_size "$pid")
assert_eq 1 "$((size > 67108864))" "the container sees the larger /dev/shm ($size bytes)"
metrics=$(curl -sf "http://127.0.0.1:$port/metrics")
assert_eq 0 "$?" "GET /metrics answers on the metrics port"
probes=$("$PY" -c 'import sys, yaml
ds = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o["kind"] == "DaemonSet"][0]
c = ds["spec"]["template"]["spec"]["containers"][0]
print(c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"])' "$d/guard.yaml")
assert_eq "/healthz /readyz" "$probes" "the DaemonSet's liveness and readiness paths"
for path in $probes; do
  code=$(curl -s -o "$d/probe.out" -w '%{http_code}' "http://127.0.0.1:$port$path")
  assert_eq 200 "$code" "GET $path answers 200 on the metrics port ($(head -n 1 "$d/probe.out"))"
done
labels='namespace="ml",pod="train",container="c0"'
assert_contains "$metrics" "gpu_run_shm_growths_total{$labels" "the growth is served with the pod's labels"
# The 56 MiB arrive faster than a sample or two: the guard, which keeps free four times the
# largest rise it saw, may grow once or twice before the write ends. The metric counts what its
# log says.
growths=$(docker logs gr-guard-$$ 2>&1 | grep -c "container c0: /dev/shm [0-9.]*[KMG]iB -> ")
assert_eq 1 "$((growths >= 1))" "the guard's log has the growth ($growths)"
assert_eq "$growths 0 $size" "$(awk -v l="{$labels" 'index($0, l) {
    split($1, n, "{"); v[n[1]] = $NF }
  END { print v["gpu_run_shm_growths_total"], v["gpu_run_shm_growth_blocked"], v["gpu_run_shm_size_bytes"] }' <<<"$metrics")" \
  "...as many growths as its log has, not blocked, the new size"
gpid=$(docker inspect -f '{{.State.Pid}}' gr-guard-$$)
status=$(grep -E '^(Uid|CapEff|Seccomp):' "/proc/$gpid/status" | tr -s '\t ' ' ')
assert_contains "$status" "Uid: 0 0 0 0" "the guard runs as root"
# DAC_OVERRIDE (1), SYS_CHROOT (18), SYS_PTRACE (19), SYS_ADMIN (21).
assert_contains "$status" "CapEff: 00000000002c0002" "...with the four capabilities and no other"
assert_contains "$status" "Seccomp: 2" "...under the runtime's default seccomp filter"
assert_eq "$(stat -c %d /dev/shm)" "$(stat -c %d "/proc/$gpid/root/dev/shm")" \
  "its /dev/shm is the host's (what the remount compares with)"
assert_eq "$host_shm_before" "$(stat -f -c '%b %S' /dev/shm)" "the host's /dev/shm is unchanged"
[[ -f $d/run-gpu-run/guard.lock && -f $d/run-gpu-run/guard.alive && -f $d/run-gpu-run/guard.state ]]
assert_eq 0 "$?" "guard.lock, guard.alive and guard.state are in the mounted /run/gpu-run"
assert_eq "" "$(docker logs gr-guard-$$ 2>&1 | grep -i 'warning')" "the guard warned of nothing"
docker stop -t 10 gr-guard-$$ >/dev/null
assert_eq 0 "$(docker inspect -f '{{.State.ExitCode}}' gr-guard-$$)" "docker stop (SIGTERM): exit 0"

# Without any one of the four, the pod's /dev/shm is not grown.
for cap in SYS_ADMIN SYS_CHROOT SYS_PTRACE DAC_OVERRIDE; do
  id=no-${cap,,}
  id=${id//_/-}
  start_pod "$id"
  pid=$POD_PID
  run_guard gr-guard-$id-$$ "$cap"
  wait_log gr-guard-$id-$$ "guarding container c0" || true
  dd if=/dev/zero of="/proc/$pid/root/dev/shm/fill" bs=1M count=56 2>/dev/null
  sleep 2
  assert_eq 67108864 "$(shm_size "$pid")" \
    "without $cap the /dev/shm is not grown: $(docker logs gr-guard-$id-$$ 2>&1 | grep -v ': guarding \|metrics at' | tail -n 1 | cut -c1-160)"
  docker rm -f gr-guard-$id-$$ >/dev/null
done

docker rmi -f "$tag" >/dev/null
assert_eq "" "$(docker image ls -q "$tag")" "the image is removed"
it_done
