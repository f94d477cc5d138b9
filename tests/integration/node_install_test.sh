#!/usr/bin/env bash
# gpu-run-ctl node install / uninstall into a host root, as the node installer's DaemonSet runs
# them: a private containerd (Debian's) plays the host's, started on DIR/etc/containerd/config.toml
# with its socket at DIR/run/containerd/containerd.sock; --restart-command restarts it in a mount
# namespace where /opt/gpu-run is DIR/opt/gpu-run (the host's path, as the handler's BinaryName
# names it). Checks that the installer waits for the CRI, that a pod through the handler gets its
# planned /dev/shm from the installed runtime and profiles, that a second install changes nothing,
# that uninstall refuses on an edited file, and that it leaves the config byte for byte and the
# host tree as they were.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=cri/cri_lib.sh
source "$HERE/cri/cri_lib.sh"

it_require_root
it_require_cmd containerd ctr runc jq unshare
BIN=${GPU_RUN_BIN_DIR:-$(dirname "${1:-}")}
[[ -x $BIN/gpu-run-runtime && -x $BIN/gpu-run-hook && -x $BIN/gpu-run-ctl && -x $BIN/gpu-run ]] ||
  it_die "gpu-run binaries not found in '$BIN' (set GPU_RUN_BIN_DIR)"
[[ -d $BIN/../share/gpu-run/profiles ]] || it_die "no built-in profiles next to $BIN (build the builtin_profiles target)"

D=$(it_tmpdir)
it_on_exit it_cri_stop "$D"
H=$D/host
SOCK=$H/run/containerd/containerd.sock
IT_CRI_SOCK=$SOCK  # read by cri_lib.sh
export IT_CRI_SOCK
it_rootfs

LOG=$D/gpu-run.log
# No profile_dirs: the runtime finds imagenet among the built-in profiles the installer copied.
printf '{"log_file": "%s", "log_level": "info"}\n' "$LOG" >"$D/gpu-run.json"
export GPU_RUN_CONFIG=$D/gpu-run.json

# The host's containerd config: the CRI base config, its sockets under the host root.
it_cri_config "$D"
mkdir -p "$H/etc/containerd" "$H/run/containerd"
sed -e "s|address = \"$D/ctd.sock\"|address = \"$SOCK\"|" -e "s|address = \"$D/ctd.sock.ttrpc\"|address = \"$SOCK.ttrpc\"|" \
  "$D/config.toml" >"$H/etc/containerd/config.toml"
rm "$D/config.toml"
grep -q "address = \"$SOCK\"" "$H/etc/containerd/config.toml" || it_die "the host config's socket was not moved"
cp "$H/etc/containerd/config.toml" "$D/config.orig"
ln -s "$SOCK" "$D/ctd.sock"  # it_cri_stop cleans the pods through it

# The host's service manager: stop containerd, start it again in a mount namespace where
# /opt/gpu-run is the host root's (when there is one).
cat >"$D/restart" <<EOT
#!/usr/bin/env bash
pid=\$(cat "$D/containerd.pid" 2>/dev/null)
if [[ -n \$pid ]] && kill -0 "\$pid" 2>/dev/null; then
  kill -TERM "\$pid"
  for ((i = 0; i < 100; i++)); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.1; done
fi
rm -f "$SOCK"
unshare -m --propagation private bash -c 'mount -t tmpfs gpu-run-test /opt && mkdir /opt/gpu-run &&
  { [[ ! -d "$H/opt/gpu-run" ]] || mount --bind "$H/opt/gpu-run" /opt/gpu-run; } &&
  exec containerd --config "$H/etc/containerd/config.toml"' >>"$D/containerd.log" 2>&1 </dev/null &
echo \$! >"$D/containerd.pid"
EOT
chmod +x "$D/restart"
echo 1 >"$D/restarts"
"$D/restart"
for ((i = 0; i < 120; i++)); do
  [[ -S $SOCK ]] && it_cri version >/dev/null 2>&1 && break
  sleep 0.5
done
it_cri version >/dev/null 2>&1 || { tail -n 30 "$D/containerd.log" >&2; it_die "the host's containerd did not start"; }
it_cri_image "$D"
# What the host looks like before: every path under the host root but containerd's run directory.
tree_of() { (cd "$H" && find . -path ./run -prune -o -print | sort); }
tree_of >"$D/tree.before"

# --- a bad host root: refused, nothing written --------------------------------------------------
out=$("$BIN/gpu-run-ctl" node install --host-root "$D/nope" 2>&1)
assert_eq 2 $? "install into a missing host root exits 2"
assert_contains "$out" "--host-root '$D/nope': not a directory" "the refusal names the flag and the path"

# --- install: programs, handler, restart, CRI, label ------------------------------------------
restart_cmd="echo restarted >>$D/restarts.log; $D/restart"
"$BIN/gpu-run-ctl" node install --host-root "$H" --restart-command "$restart_cmd" --cri-timeout 60 >"$D/install.out" 2>&1
assert_eq 0 $? "node install succeeds ($(tail -n 3 "$D/install.out"))"
assert_eq 1 "$(grep -c restarted "$D/restarts.log" 2>/dev/null)" "install restarted containerd once"
assert_contains "$(cat "$D/install.out")" "containerd's CRI answers on /run/containerd/containerd.sock" \
  "install waited until the restarted containerd's CRI answered"
for f in bin/gpu-run-runtime bin/gpu-run-hook bin/gpu-run-ctl bin/gpu-run share/gpu-run/profiles/imagenet.json; do
  cmp -s "$H/opt/gpu-run/$f" "$BIN/$([[ $f == bin/* ]] && echo "${f#bin/}" || echo "../$f")" &&
    it_pass "/opt/gpu-run/$f is the build's" || it_fail "/opt/gpu-run/$f missing or different"
done
assert_contains "$(cat "$H/etc/containerd/config.toml")" 'BinaryName = "/opt/gpu-run/bin/gpu-run-runtime"' \
  "the handler runs the installed runtime, by the host's path"
assert_eq "gpu-run.io/runtime=gpu-run" \
  "$(grep -v '^#' "$H/etc/kubernetes/node-feature-discovery/features.d/gpu-run")" \
  "the NFD feature file sets the RuntimeClass's label"
assert_eq 0 "$(find "$H/etc/kubernetes/node-feature-discovery/features.d" -name '.*' | wc -l)" \
  "no hidden temp file is left in features.d"
assert_eq "$(sha256sum <"$H/opt/gpu-run/bin/gpu-run-runtime" | cut -d' ' -f1)" \
  "$(jq -r '.files[] | select(.path == "/opt/gpu-run/bin/gpu-run-runtime") | .sha256' "$H/var/lib/gpu-run/node-install.json")" \
  "the record holds the runtime's checksum"

# --- a pod through the handler: the installed runtime and profiles size it ----------------------
want=$("$BIN/gpu-run" --profile imagenet --gpus 2 --workers 4 --gpu-request none --json img | jq -r .plan.shm_bytes)
it_cri pod --name installed --handler gpu-run \
  --annotations '{"gpu-run.profile": "imagenet", "gpu-run.gpus": "2", "gpu-run.workers": "4"}' >"$D/p.json" 2>"$D/p.err"
assert_eq 0 $? "a pod through the installed handler starts ($(cat "$D/p.err"))"
kib=$(it_cri exec "$(jq -r '.containers[0]' "$D/p.json")" df -k /dev/shm | awk 'NR == 2 { print $2 }')
assert_eq $((want / 1024)) "$kib" "the pod sees /dev/shm at the plan (imagenet from /opt/gpu-run's profiles)"
assert_contains "$(grep "$(jq -r .pod "$D/p.json")" "$LOG")" "action=resized" "the installed gpu-run-runtime logged the resize"
it_cri rm-pod "$(jq -r .pod "$D/p.json")" >/dev/null 2>&1

# --- again: nothing changes, no restart ---------------------------------------------------------
sum=$(sha256sum <"$H/etc/containerd/config.toml")
"$BIN/gpu-run-ctl" node install --host-root "$H" --restart-command "$restart_cmd" >"$D/install2.out" 2>&1
assert_eq 0 $? "a second install succeeds ($(tail -n 2 "$D/install2.out"))"
assert_eq 1 "$(grep -c restarted "$D/restarts.log")" "a second install restarts nothing"
assert_eq "$sum" "$(sha256sum <"$H/etc/containerd/config.toml")" "a second install leaves the config as it was"

# --- uninstall refuses on an edited file, changing nothing ---------------------------------------
cp "$H/opt/gpu-run/share/gpu-run/profiles/imagenet.json" "$D/imagenet.keep"
echo ' ' >>"$H/opt/gpu-run/share/gpu-run/profiles/imagenet.json"
out=$("$BIN/gpu-run-ctl" node uninstall --host-root "$H" --restart-command "$restart_cmd" 2>&1)
assert_eq 2 $? "uninstall with an edited profile exits 2"
assert_contains "$out" "/opt/gpu-run/share/gpu-run/profiles/imagenet.json (edited)" "the refusal names the edited file"
assert_eq "$sum" "$(sha256sum <"$H/etc/containerd/config.toml")" "the refused uninstall left the config"
[[ -f $H/etc/kubernetes/node-feature-discovery/features.d/gpu-run ]] && it_pass "the refused uninstall left the label" ||
  it_fail "the refused uninstall removed the feature file"
cp "$D/imagenet.keep" "$H/opt/gpu-run/share/gpu-run/profiles/imagenet.json"

# --- uninstall: the host as it was ---------------------------------------------------------------
"$BIN/gpu-run-ctl" node uninstall --host-root "$H" --restart-command "$restart_cmd" --cri-timeout 60 >"$D/un.out" 2>&1
assert_eq 0 $? "node uninstall succeeds ($(tail -n 3 "$D/un.out"))"
assert_eq 2 "$(grep -c restarted "$D/restarts.log")" "uninstall restarted containerd once"
cmp -s "$D/config.orig" "$H/etc/containerd/config.toml" && it_pass "containerd's config is byte for byte as before" ||
  it_fail "containerd's config differs from before the install"
tree_of >"$D/tree.after"
diff "$D/tree.before" "$D/tree.after" >"$D/tree.diff" && it_pass "the host tree is as before (no file or directory left)" ||
  it_fail "the host tree differs: $(head -5 "$D/tree.diff" | tr '\n' ' ')"
it_cri pod --name gone --handler gpu-run >"$D/g.json" 2>"$D/g.err"
assert_eq 1 $? "after uninstall a pod on the handler fails (the restarted containerd has no handler gpu-run)"
it_cri pod --name plain --handler runc >"$D/r.json" 2>"$D/r.err"
assert_eq 0 $? "after uninstall a runc pod starts ($(cat "$D/r.err"))"
out=$("$BIN/gpu-run-ctl" node uninstall --host-root "$H" 2>&1)
assert_eq 0 $? "a second uninstall exits 0"
assert_contains "$out" "nothing installed here" "a second uninstall says there is nothing to do"

it_done
