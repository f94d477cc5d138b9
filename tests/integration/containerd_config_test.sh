#!/usr/bin/env bash
# `gpu-run-ctl configure containerd` against Debian's real containerd: the file it writes (from
# Debian's stock config.toml, from nothing, from a kubeadm-style config with comments) is read
# by `containerd config dump` with the handler, its options and pod_annotations, and a private
# containerd started on it loads its CRI plugin; running it again changes nothing; --print
# writes nothing; a malformed file and a version 1 file are refused and left as they were; the
# file's mode and owner are kept. `gpu-run-ctl k8s runtimeclass` is read back by the
# Kubernetes Python client's RuntimeClass model.
# Usage: containerd_config_test.sh [PATH/TO/gpu-run]   (gpu-run-ctl is looked up next to it, or
# in $GPU_RUN_BIN_DIR)
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_root
it_require_cmd containerd ctr
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, yaml' 2>/dev/null ||
  it_skip "python3-kubernetes is needed (scripts/install-deps installs it)"

it_binaries "${1:-}" gpu-run-ctl gpu-run-runtime
CTL=$IT_BIN/gpu-run-ctl
RUNTIME=$(readlink -f "$IT_BIN/gpu-run-runtime")
it_log "testing $CTL with $(containerd --version)"

work=$(it_tmpdir)
it_on_exit rm -rf "$work"

# The handler table as `containerd config dump` prints it (config version 2).
table='[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu-run]'

# dump_section FILE: containerd's view of FILE's gpu-run handler (its table and options).
dump_section() {
  containerd --config "$1" config dump 2>"$work/dump.err" |
    awk -v t="$table" 'index($0, t) { on = 1 } on && /^ *\[/ && !index($0, "runtimes.gpu-run") { on = 0 } on'
}

# start_containerd CONFIG SOCKET LOG: a private containerd on CONFIG (its root, state and SOCKET
# set in it), stopped at exit; IT_CTD_PID is its pid. Returns when SOCKET is there.
start_containerd() {
  containerd --config "$1" >"$3" 2>&1 </dev/null &
  IT_CTD_PID=$!
  it_on_exit it__stop_pid "$IT_CTD_PID" 15
  for ((i = 0; i < 60; i++)); do
    [[ -S $2 ]] && return 0
    sleep 0.25
  done
  it_die "private containerd on $1 did not come up: $(tail -n 5 "$3")"
}

# --- 1. Debian's stock /etc/containerd/config.toml (as the package ships it) ----------------------
stock=$work/stock.toml
cp "$here/../data/containerd/debian-stock.toml" "$stock"
cp "$stock" "$work/stock.orig"
assert_exit 0 "$CTL" configure containerd --containerd-config "$stock" --runtime-path "$RUNTIME"
printf '%s\n' "$IT_OUT" >"$work/first-run.txt"
assert_contains "$IT_OUT" "wrote $stock: runtime handler gpu-run" "says what it wrote"
assert_contains "$IT_OUT" "backup of the previous file (what --undo restores): $stock.gpu-run.bak" "names the backup"
assert_contains "$IT_OUT" "systemctl restart containerd" "says how to restart containerd"
assert_contains "$IT_OUT" "runtimeClassName: gpu-run" "says how pods use it"
assert_contains "$IT_OUT" "runtimes.runc" "says it added runc (the stock config names no runtime)"
assert_eq "" "$(cmp "$stock.gpu-run.bak" "$work/stock.orig" 2>&1)" "the backup is the previous file"

section=$(dump_section "$stock")
assert_eq "" "$(cat "$work/dump.err")" "containerd config dump reads the file without a word"
assert_contains "$section" 'runtime_type = "io.containerd.runc.v2"' "containerd sees runtime_type runc.v2"
assert_contains "$section" 'pod_annotations = ["gpu-run.*", "io.kubernetes.cri-o.ShmSize"]' \
  "containerd sees the pod_annotations"
assert_contains "$section" '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu-run.options]' \
  "containerd sees the options table"
assert_contains "$section" "BinaryName = \"$RUNTIME\"" "containerd sees BinaryName = gpu-run-runtime"
dump=$(containerd --config "$stock" config dump 2>/dev/null)
assert_contains "$dump" '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]' "runc is still a runtime"
assert_contains "$dump" 'bin_dir = "/usr/lib/cni"' "the stock cni setting is kept"
assert_contains "$dump" 'path = "/var/lib/containerd/opt"' "the stock opt plugin setting is kept"

# --- 2. Again: nothing changes, no backup --------------------------------------------------------------
rm -f "$stock.gpu-run.bak"
before=$(stat -c '%i %Y %s' "$stock")
sum=$(sha256sum <"$stock")
assert_exit 0 "$CTL" configure containerd --containerd-config "$stock" --runtime-path "$RUNTIME"
assert_contains "$IT_OUT" "already configured" "a second run says it is already configured"
assert_contains "$IT_OUT" "nothing changed" "a second run says nothing changed"
assert_eq "$sum" "$(sha256sum <"$stock")" "a second run leaves the file's content"
assert_eq "$before" "$(stat -c '%i %Y %s' "$stock")" "a second run does not rewrite the file"
assert_eq "no" "$([[ -e $stock.gpu-run.bak ]] && echo yes || echo no)" "a second run makes no backup"

# --- 3. A private containerd on the written config loads its CRI plugin with the handler ------------
ctd=$work/ctd
mkdir -p "$ctd"
# cri_status SRC NAME: starts a private containerd on a copy of SRC (its own root, state and
# socket; top-level keys must precede the tables, so they go right after the version line),
# prints the state of its CRI plugin as `ctr plugins ls` shows it (ok, error) and stops it.
# Its log stays in $ctd/NAME.log.
cri_status() {
  local sock=$ctd/$2.sock
  {
    sed -n '/^version/p' "$1"
    printf 'root = "%s/root"\nstate = "%s/state"\n' "$ctd" "$ctd"
    printf '[grpc]\n  address = "%s"\n[ttrpc]\n  address = "%s.ttrpc"\n' "$sock" "$sock"
    sed '/^version/d' "$1"
  } >"$ctd/$2.toml"
  start_containerd "$ctd/$2.toml" "$sock" "$ctd/$2.log"
  ctr --address "$sock" plugins ls 2>&1 | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }'
  it__stop_pid "$IT_CTD_PID" 15
}
assert_eq "ok" "$(cri_status "$stock" written)" "containerd's CRI plugin loads with the written config"
assert_not_contains "$(cat "$ctd/written.log")" "no corresponding runtime configured" \
  "containerd finds its default runtime"

# Without the runc table the same containerd refuses its CRI plugin: the reason gpu-run-ctl adds it.
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu-run]\n  runtime_type = "%s"\n' \
  io.containerd.runc.v2 >"$work/norunc.toml"
assert_eq "error" "$(cri_status "$work/norunc.toml" norunc)" \
  "control: without runc's table containerd's CRI plugin fails to load"
assert_contains "$(cat "$ctd/norunc.log")" "no corresponding runtime configured" "control: containerd says why"

# --- 4. A kubeadm-style config: comments, other runtimes and settings survive -------------------------
node=$work/node.toml
cp "$here/../data/containerd/kubeadm.toml" "$node"
chmod 0600 "$node"
chown nobody:nogroup "$node"
assert_exit 0 "$CTL" configure containerd --containerd-config "$node" --runtime-path "$RUNTIME"
text=$(cat "$node")
assert_contains "$text" "# node config, managed by hand" "the file's first comment is kept"
assert_contains "$text" "# pinned for the air-gapped cluster" "a comment on a key is kept"
assert_eq "600 nobody:nogroup" "$(stat -c '%a %U:%G' "$node")" "the file's mode and owner are kept"
dump=$(containerd --config "$node" config dump 2>/dev/null)
assert_contains "$dump" 'sandbox_image = "registry.local/pause:3.9"' "containerd still sees the sandbox image"
assert_contains "$dump" 'BinaryName = "/usr/bin/nvidia-container-runtime"' "containerd still sees the nvidia handler"
section=$(dump_section "$node")
assert_contains "$section" "BinaryName = \"$RUNTIME\"" "containerd sees gpu-run's BinaryName"
assert_contains "$section" "SystemdCgroup = true" "gpu-run's handler uses the node's cgroup driver (SystemdCgroup)"

# A moved runtime updates the handler and says what changed.
cp "$RUNTIME" "$work/gpu-run-runtime"
assert_exit 0 "$CTL" configure containerd --containerd-config "$node" --runtime-path "$work/gpu-run-runtime"
assert_contains "$IT_OUT" "BinaryName was \"$RUNTIME\", now \"$work/gpu-run-runtime\"" "an update says what changed"
assert_contains "$(dump_section "$node")" "BinaryName = \"$work/gpu-run-runtime\"" "containerd sees the new BinaryName"

# --- 5. No file: a minimal version 2 config; --print writes nothing ------------------------------------
fresh=$work/etc/containerd/config.toml
assert_exit 0 "$CTL" configure containerd --containerd-config "$fresh" --runtime-path "$RUNTIME" --print
assert_eq "no" "$([[ -e $fresh ]] && echo yes || echo no)" "--print writes nothing"
assert_contains "$IT_ERR" "would become the TOML above" "--print says what it did not do"
printf '%s\n' "$IT_OUT" >"$work/printed.toml"
assert_contains "$(dump_section "$work/printed.toml")" "BinaryName = \"$RUNTIME\"" \
  "containerd reads what --print shows"
assert_exit 0 "$CTL" configure containerd --containerd-config "$fresh" --runtime-path "$RUNTIME"
assert_eq "no" "$([[ -e $fresh.gpu-run.bak ]] && echo yes || echo no)" "a new file has no backup"
assert_eq "644" "$(stat -c '%a' "$fresh")" "a new file is mode 0644"
assert_eq "$(cat "$work/printed.toml")" "$(cat "$fresh")" "the file written is what --print showed"
assert_contains "$(dump_section "$fresh")" 'pod_annotations = ["gpu-run.*", "io.kubernetes.cri-o.ShmSize"]' \
  "containerd reads the new file's handler"
assert_exit 0 "$CTL" configure containerd --containerd-config "$fresh" --runtime-path "$RUNTIME" --print
assert_contains "$IT_ERR" "is already configured" "--print on a configured file says so"
assert_eq "$(cat "$fresh")" "$IT_OUT" "--print on a configured file shows the file as it is"

# --- 6. Refused, and left as they were: malformed TOML, version 1, a bad handler name --------------
bad=$work/bad.toml
printf 'version = 2\n[plugins\n' >"$bad"
assert_exit 2 "$CTL" configure containerd --containerd-config "$bad" --runtime-path "$RUNTIME"
assert_contains "$IT_ERR" "$bad:2: " "a malformed file is reported with its line"
assert_eq 1 "$(printf '%s\n' "$IT_ERR" | wc -l)" "the report is one line"
assert_eq "$(printf 'version = 2\n[plugins\n')" "$(cat "$bad")" "a malformed file is left as it was"
assert_eq "no" "$([[ -e $bad.gpu-run.bak ]] && echo yes || echo no)" "a malformed file gets no backup"
containerd --config "$bad" config dump >/dev/null 2>&1
assert_eq 1 "$?" "control: containerd refuses that file too"

v1=$work/v1.toml
printf 'version = 1\n[plugins.cri]\n  sandbox_image = "pause"\n' >"$v1"
assert_exit 2 "$CTL" configure containerd --containerd-config "$v1" --runtime-path "$RUNTIME"
assert_contains "$IT_ERR" "config version 1" "a version 1 file is refused"
assert_contains "$IT_ERR" "convert it" "the refusal says what to do"
assert_eq "$(printf 'version = 1\n[plugins.cri]\n  sandbox_image = "pause"\n')" "$(cat "$v1")" \
  "a version 1 file is left as it was"

assert_exit 2 "$CTL" configure containerd --containerd-config "$stock" --runtime-path "$RUNTIME" --handler GPU_run
assert_contains "$IT_ERR" "--handler 'GPU_run'" "a bad handler name is refused naming the flag"
assert_exit 2 "$CTL" configure containerd --containerd-config "$stock" --runtime-path "$work/no-such-runtime"
assert_contains "$IT_ERR" "--runtime-path $work/no-such-runtime: not an executable file" \
  "a missing runtime is refused naming the flag"

# --- 7. k8s runtimeclass: a RuntimeClass the Kubernetes client reads ------------------------------------
check_runtimeclass() {  # check_runtimeclass HANDLER: prints "name handler" from the model
  "$PY" -c '
import sys, yaml
from kubernetes import client
doc = yaml.safe_load(sys.stdin)
assert doc["apiVersion"] == "node.k8s.io/v1" and doc["kind"] == "RuntimeClass", doc
class Resp:  # ApiClient.deserialize reads .data
    data = __import__("json").dumps(doc)
rc = client.ApiClient().deserialize(Resp, "V1RuntimeClass")
print(rc.metadata.name, rc.handler)
'
}
assert_exit 0 "$CTL" k8s runtimeclass
printf '%s\n' "$IT_OUT" >"$work/runtimeclass.yaml"
assert_eq "gpu-run gpu-run" "$(check_runtimeclass <"$work/runtimeclass.yaml" 2>&1)" \
  "k8s runtimeclass is a V1RuntimeClass named gpu-run with handler gpu-run"
assert_exit 0 "$CTL" k8s runtimeclass --handler gpu-run-b
assert_eq "gpu-run-b gpu-run-b" "$(printf '%s\n' "$IT_OUT" | check_runtimeclass 2>&1)" "--handler names both"
assert_exit 2 "$CTL" k8s runtimeclass --handler Bad.Name
assert_contains "$IT_ERR" "--handler 'Bad.Name'" "a bad handler name is refused"

it_done
