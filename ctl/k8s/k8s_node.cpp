#include "ctl/k8s/k8s_node.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/k8s/manifest.hpp"
#include "decision/contract.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr const char* kNodeApp = "gpu-run-node";
constexpr const char* kHostMount = "/host";

void check_node_path(const std::string& path, const std::string& flag) {
  bool ok = path.size() >= 2 && path.size() <= 256 && path[0] == '/' && (path + "/").find("/../") == std::string::npos;
  for (const char ch : path) ok = ok && static_cast<unsigned char>(ch) > ' ' && ch != 0x7f;
  if (!ok) throw usage_error(flag + " '" + k8s_shown(path) + "': expected an absolute path on the nodes");
}

ordered_json node_daemon_set(const NodeManifestOptions& o, const std::string& image, const std::string& pause,
                             const DaemonSetPlacement& placement) {
  const std::string name = o.uninstall ? "gpu-run-node-uninstaller" : "gpu-run-node-installer";
  ordered_json args = {"node",      o.uninstall ? "uninstall" : "install", "--host-root", kHostMount, "--cri-socket",
                       o.cri_socket};
  if (!o.uninstall) {
    args.push_back("--containerd-config");
    args.push_back(o.containerd_config);
    args.push_back("--handler");
    args.push_back(o.handler);
  }
  const ordered_json step = {
      {"name", o.uninstall ? "uninstall" : "install"},
      {"image", image},
      {"command", {"/usr/bin/gpu-run-ctl"}},
      {"args", args},
      // chroot into the host's root, setns into PID 1's namespaces for systemctl: privileged, as
      // NVIDIA's container toolkit DaemonSet is.
      {"securityContext", {{"privileged", true}, {"runAsUser", 0}}},
      {"volumeMounts", {{{"name", "host"}, {"mountPath", kHostMount}, {"mountPropagation", "HostToContainer"}}}}};
  const ordered_json waiting = {
      {"name", "done"},
      {"image", pause},
      {"resources", {{"requests", {{"cpu", "1m"}, {"memory", "4Mi"}}}, {"limits", {{"memory", "16Mi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"runAsNonRoot", true},
        {"runAsUser", 65535},
        {"capabilities", {{"drop", {"ALL"}}}},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
  ordered_json pod_spec = {{"hostPID", true},
                           {"automountServiceAccountToken", false},
                           {"terminationGracePeriodSeconds", 5},
                           {"initContainers", ordered_json::array({step})},
                           {"containers", ordered_json::array({waiting})},
                           {"volumes", {{{"name", "host"}, {"hostPath", {{"path", "/"}, {"type", "Directory"}}}}}}};
  apply_placement(pod_spec, placement);
  ordered_json d = manifest_object("apps/v1", "DaemonSet", manifest_metadata(name, o.namespace_name, kNodeApp));
  ordered_json selector = app_labels(kNodeApp);
  selector["app.kubernetes.io/component"] = o.uninstall ? "uninstaller" : "installer";
  d["spec"] = {{"selector", {{"matchLabels", selector}}},
               {"updateStrategy",
                {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", placement.max_unavailable}}}}},
               {"template", {{"metadata", {{"labels", selector}}}, {"spec", pod_spec}}}};
  return d;
}

}  // namespace

std::vector<ordered_json> node_manifests(const NodeManifestOptions& o) {
  check_manifest_namespace(o.namespace_name);
  const std::string image = manifest_image(o.image, kDefaultGuardImage);
  std::string pause;
  try {
    pause = manifest_image(o.pause_image, "registry.k8s.io/pause:3.9");
  } catch (const Error& e) {
    throw usage_error("--pause-image '" + k8s_shown(o.pause_image) + "': expected an image reference without spaces");
  }
  if (!is_k8s_dns_label(o.handler))
    throw usage_error("--handler '" + k8s_shown(o.handler) +
                      "': expected the runtime handler's name (lowercase letters, digits and '-', at most 63)");
  check_node_path(o.containerd_config, "--containerd-config");
  check_node_path(o.cri_socket, "--cri-socket");
  // The uninstaller goes where an installer labelled a node, GPU or not.
  const DaemonSetPlacement placement = daemon_set_placement(o, "the installer's", /*or_runtime_label=*/o.uninstall);
  const ordered_json labels = parse_label_flags(o.labels, "--label");

  std::vector<ordered_json> out;
  ordered_json ns_labels = app_labels(kNodeApp);
  // A privileged init container with the host's / mounted: Pod Security's "privileged".
  ns_labels["pod-security.kubernetes.io/enforce"] = "privileged";
  out.push_back(manifest_object("v1", "Namespace", {{"name", o.namespace_name}, {"labels", ns_labels}}));
  out.push_back(node_daemon_set(o, image, pause, placement));
  if (!o.uninstall) {
    ordered_json rc = manifest_object("node.k8s.io/v1", "RuntimeClass", manifest_metadata(o.handler, "", kNodeApp));
    rc["handler"] = o.handler;
    rc["scheduling"] = {{"nodeSelector", {{kRuntimeNodeLabel, o.handler}}}};
    out.push_back(rc);
  }
  add_object_labels(out, labels);
  return out;
}

std::string render_node_manifests(const NodeManifestOptions& o) {
  const std::vector<ordered_json> objects = node_manifests(o);
  const std::string where = o.all_nodes
                                ? std::string("every node")
                                : std::string("GPU nodes (") + kGpuPresentLabel + "=true" +
                                      (o.uninstall ? std::string(", or ") + kRuntimeNodeLabel + " set" : "") + ")";
  std::string header;
  if (o.uninstall) {
    header = "# gpu-run's node uninstaller in namespace " + o.namespace_name +
             " (gpu-run-ctl k8s node-manifests --uninstall): a DaemonSet whose\n"
             "# init container runs `gpu-run-ctl node uninstall --host-root /host` on " +
             where +
             ": the handler out of\n# containerd's config (restored as it was), containerd restarted, the programs, "
             "profiles and the\n# feature file removed (Node Feature Discovery drops the " +
             kRuntimeNodeLabel +
             " label). A node where\n# someone edited a file gpu-run wrote since keeps everything; its init container "
             "says which file.\n"
             "# Steps: delete the pods that use runtimeClassName " +
             o.handler +
             ", then\n"
             "#   kubectl -n " +
             o.namespace_name + " delete daemonset gpu-run-node-installer; kubectl delete runtimeclass " + o.handler +
             "\n#   kubectl apply -f THIS; kubectl -n " + o.namespace_name +
             " rollout status daemonset gpu-run-node-uninstaller\n#   kubectl delete -f THIS\n";
  } else {
    header = "# gpu-run's node installer in namespace " + o.namespace_name +
             " (gpu-run-ctl k8s node-manifests): a DaemonSet whose init container\n"
             "# runs `gpu-run-ctl node install --host-root /host` on " +
             where + ": the programs under /opt/gpu-run,\n# the runtime handler " + o.handler + " in " +
             o.containerd_config +
             " (chaining the default runtime, NVIDIA's on a GPU Operator node),\n"
             "# containerd restarted when its config changed, and a Node Feature Discovery feature file whose label\n"
             "# (" +
             kRuntimeNodeLabel + "=" + o.handler + ") the RuntimeClass " + o.handler +
             " schedules by. Then a pause container keeps the pod.\n"
             "# Tolerated: " +
             tolerated_words(o) + ". Priority " + o.priority_class + ".\n" +
             "# Deleting this DaemonSet leaves gpu-run on the nodes (a removal looks like a restart to a pod):\n"
             "# `gpu-run-ctl k8s node-manifests --uninstall` prints what takes it off.\n"
             "# What the pod may do, and why: privileged, hostPID and the host's / at /host: chroot into it to edit\n"
             "#   containerd's config as the host reads it, and systemctl restart containerd in PID 1's namespaces.\n"
             "#   No service account token: it never calls the API server.\n";
  }
  return render_manifest_stream(header, objects);
}

void add_k8s_node_command(CLI::App& k8s) {
  auto o = std::make_shared<NodeManifestOptions>();
  CLI::App* cmd = k8s.add_subcommand(
      "node-manifests",
      "Print the node installer's DaemonSet (gpu-run-ctl node install on every GPU node) and the RuntimeClass; "
      "--uninstall: what takes gpu-run off every node");
  add_namespace_and_image_options(
      *cmd, o->namespace_name, o->image, "the installer",
      "The installer's image, holding the programs (default: " + kDefaultGuardImage + ", the guard's)");
  cmd->add_option("--pause-image", o->pause_image, "What the pod runs once installed")
      ->type_name("IMAGE")
      ->capture_default_str();
  cmd->add_option("--handler", o->handler, "The runtime handler's name, and the RuntimeClass's")
      ->type_name("NAME")
      ->capture_default_str();
  cmd->add_option("--containerd-config", o->containerd_config, "containerd's config.toml on the nodes")
      ->type_name("PATH")
      ->capture_default_str();
  cmd->add_option("--cri-socket", o->cri_socket, "containerd's socket on the nodes")
      ->type_name("PATH")
      ->capture_default_str();
  add_placement_options(*cmd, *o, "the installer's");
  cmd->add_option("--label", o->labels, "A label on every object (repeatable)")->type_name("KEY=VALUE");
  cmd->add_flag("--uninstall", o->uninstall,
                "Print the DaemonSet that runs `gpu-run-ctl node uninstall` on every node instead");
  cmd->footer(
      "Apply with: gpu-run-ctl k8s node-manifests | kubectl apply -f -\n"
      "Needs Node Feature Discovery (the GPU Operator runs it) for the node label the RuntimeClass selects.\n"
      "Removing: gpu-run-ctl k8s node-manifests --uninstall (its header lists the steps).");
  cmd->callback([o] { std::cout << render_node_manifests(*o); });
}

}  // namespace gpurun
