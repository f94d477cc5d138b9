#!/usr/bin/env bash
# gpu-run-ctl k8s node-manifests: packaging/kubernetes/gpu-run-node.yaml and
# gpu-run-node-uninstall.yaml are the command's output; bad flags are one line naming the flag,
# exit 2; kubectl reads every object client-side (`kubectl label --local`, no cluster); the
# Kubernetes Python client's models round-trip them unchanged, and the objects agree: the
# installer's init container runs `node install` on the host's / with the flags given, on GPU
# nodes (nvidia.com/gpu.present=true) unless --all-nodes, without a service account token (no
# RBAC); the RuntimeClass selects the label the installer's feature file sets; the uninstaller
# runs `node uninstall` on nodes with either label. Starts nothing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

it_require_cmd kubectl jq
PY=/usr/bin/python3
[[ -x $PY ]] || it_skip "/usr/bin/python3 not found (apt-get install python3)"
"$PY" -c 'import kubernetes, yaml' 2>/dev/null ||
  it_skip "python3-kubernetes and python3-yaml are needed (scripts/install-deps installs them)"
it_binaries "${1:-}" gpu-run-ctl
CTL=$IT_BIN/gpu-run-ctl

work=$(it_tmpdir)
it_on_exit rm -rf "$work"

"$CTL" k8s node-manifests >"$work/install.yaml"
assert_eq 0 "$?" "node-manifests: exit 0"
assert_eq "" "$(diff "$work/install.yaml" "$here/../../packaging/kubernetes/gpu-run-node.yaml")" \
  "packaging/kubernetes/gpu-run-node.yaml is the output of node-manifests"
"$CTL" k8s node-manifests --uninstall >"$work/uninstall.yaml"
assert_eq 0 "$?" "node-manifests --uninstall: exit 0"
assert_eq "" "$(diff "$work/uninstall.yaml" "$here/../../packaging/kubernetes/gpu-run-node-uninstall.yaml")" \
  "packaging/kubernetes/gpu-run-node-uninstall.yaml is the output of node-manifests --uninstall"
"$CTL" k8s node-manifests --namespace gpu-nodes --image example.test/gpu-run:2 --handler shm \
  --containerd-config /etc/k3s/containerd/config.toml --cri-socket /run/k3s/containerd/containerd.sock \
  --toleration all --node-selector pool=train --image-pull-secret regcred --priority-class gpu-agents \
  --max-unavailable 25% --all-nodes --label team=ml >"$work/custom.yaml"
assert_eq 0 "$?" "node-manifests with every flag: exit 0"

for bad in "--namespace Bad_NS" "--image two\ words" "--handler Bad" "--containerd-config etc/c.toml" \
  "--cri-socket run/x.sock" "--toleration x:Never" "--node-selector pool" "--image-pull-secret Reg_Cred" \
  "--priority-class Bad" "--max-unavailable 0%" "--label app.kubernetes.io/name=x" "--pause-image a\ b"; do
  flag=${bad%% *}
  out=$(eval "\"\$CTL\" k8s node-manifests $bad" 2>&1)
  rc=$?
  assert_eq "2 1" "$rc $(wc -l <<<"$out")" "$bad: exit 2, one line"
  assert_contains "$out" "$flag '" "...naming $flag"
done

for f in install uninstall custom; do
  kinds=$(kubectl label --local -f "$work/$f.yaml" gpu-run.io/checked=yes -o json 2>"$work/kubectl.err" |
    jq -r 'if .items then .items[].kind else .kind end' | tr '\n' ' ')
  want="Namespace DaemonSet RuntimeClass "
  [[ $f == uninstall ]] && want="Namespace DaemonSet "
  assert_eq "$want" "$kinds" "$f: kubectl reads every object offline ($(head -c 200 "$work/kubectl.err"))"
done

cat >"$work/check.py" <<'PYEOF'
import sys
from k8s_models import check, done, read_objects

MODELS = {"Namespace": "V1Namespace", "DaemonSet": "V1DaemonSet", "RuntimeClass": "V1RuntimeClass"}
path, variant = sys.argv[1], sys.argv[2]
objs = read_objects(path, MODELS, variant)
ns, handler, config, sock = {"install": ("gpu-run-node", "gpu-run", "/etc/containerd/config.toml", "/run/containerd/containerd.sock"),
                             "uninstall": ("gpu-run-node", "gpu-run", None, "/run/containerd/containerd.sock"),
                             "custom": ("gpu-nodes", "shm", "/etc/k3s/containerd/config.toml", "/run/k3s/containerd/containerd.sock")}[variant]
d = objs["DaemonSet"]
pod = d.spec.template.spec
init = pod.init_containers[0]
check(d.metadata.namespace == ns and objs["Namespace"].metadata.name == ns
      and objs["Namespace"].metadata.labels["pod-security.kubernetes.io/enforce"] == "privileged",
      variant + ": the DaemonSet in its namespace, Pod Security privileged")
check(d.spec.selector.match_labels == d.spec.template.metadata.labels, variant + ": the selector selects its pods")
check(pod.automount_service_account_token is False and pod.host_pid and pod.service_account_name is None,
      variant + ": hostPID, no service account token, no RBAC")
verb = "uninstall" if variant == "uninstall" else "install"
want = ["node", verb, "--host-root", "/host", "--cri-socket", sock]
if verb == "install":
    want += ["--containerd-config", config, "--handler", handler]
check(init.command == ["/usr/bin/gpu-run-ctl"] and init.args == want, variant + ": the init container runs " + " ".join(want))
host = [v for v in pod.volumes if v.host_path]
check(len(host) == 1 and host[0].host_path.path == "/" and init.volume_mounts[0].mount_path == "/host"
      and init.security_context.privileged, variant + ": the host's / at /host, privileged (chroot, PID 1's namespaces)")
check(pod.containers[0].security_context.run_as_non_root and pod.containers[0].security_context.capabilities.drop == ["ALL"],
      variant + ": the waiting container holds nothing")
if variant == "custom":
    check(pod.affinity is None and pod.node_selector == {"pool": "train"} and pod.priority_class_name == "gpu-agents"
          and pod.image_pull_secrets[0].name == "regcred" and pod.tolerations[0].operator == "Exists"
          and d.spec.update_strategy.rolling_update.max_unavailable == "25%"
          and all(o.metadata.labels.get("team") == "ml" for o in objs.values()),
          "custom: --all-nodes, node selector, priority class, pull secret, toleration, maxUnavailable, --label")
else:
    terms = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    keys = [(e.key, e.operator) for t in terms for e in t.match_expressions]
    want_keys = [("nvidia.com/gpu.present", "In")] + ([("gpu-run.io/runtime", "Exists")] if verb == "uninstall" else [])
    check(keys == want_keys and pod.priority_class_name == "system-node-critical"
          and any(t.key == "nvidia.com/gpu" for t in pod.tolerations),
          variant + ": on GPU nodes%s, system-node-critical, the GPU taint tolerated"
          % (" or labelled gpu-run.io/runtime" if verb == "uninstall" else ""))
if verb == "install":
    rc = objs["RuntimeClass"]
    check(rc.handler == handler and rc.metadata.name == handler
          and rc.scheduling.node_selector == {"gpu-run.io/runtime": handler},
          variant + ": the RuntimeClass runs the handler on nodes labelled gpu-run.io/runtime=" + handler)
else:
    check("RuntimeClass" not in objs, "uninstall: no RuntimeClass (delete it first)")
done()
PYEOF
for f in install uninstall custom; do
  PYTHONPATH=$here "$PY" "$work/check.py" "$work/$f.yaml" "$f" >"$work/$f.out" 2>&1
  rc=$?
  it_count_checks "$work/$f.out"
  [[ $rc -eq 0 ]] || it_fail "$f: the model checks failed ($(grep -v '^ok' "$work/$f.out" | head -3 | tr '\n' ' '))"
done
it_done
