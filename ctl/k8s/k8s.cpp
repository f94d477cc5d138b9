#include "k8s.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <regex>

#include "contract.hpp"
#include "ctl_common.hpp"
#include "error.hpp"
#include "k8s_guard.hpp"
#include "k8s_quantity.hpp"
#include "k8s_webhook.hpp"
#include "plan.hpp"
#include "profile.hpp"
#include "run_options.hpp"
#include "shm_guard.hpp"
#include "units.hpp"
#include "yaml.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

bool is_dns_subdomain(const std::string& s) {
  static const std::regex subdomain("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return s.size() <= 253 && std::regex_match(s, subdomain);
}

}  // namespace

ordered_json k8s_patch(const K8sOptions& o, const ShmPlan& plan) {
  if (o.container.empty())
    throw usage_error(
        "--container is required: name the pod's container to patch (kubectl get pod POD -o "
        "jsonpath='{.spec.containers[*].name}'); a strategic-merge patch matches containers by name and would "
        "add a new one");
  if (!is_k8s_dns_label(o.container))
    throw usage_error(
        "--container '" + k8s_shown(o.container) +
        "': expected the container's name as Kubernetes writes it (lowercase letters, digits and '-', at most 63)");
  if (o.runtime_class && !is_dns_subdomain(*o.runtime_class))
    throw usage_error("--runtime-class '" + k8s_shown(*o.runtime_class) +
                      "': expected a RuntimeClass name (lowercase letters, digits, '-' and '.')");
  const std::uint64_t base =
      o.memory ? parse_k8s_quantity(*o.memory, "--memory") : kK8sBaseMemoryPerRank * std::max(plan.ranks, 1u);
  if (base > (1ull << 62)) throw usage_error("--memory '" + k8s_shown(*o.memory) + "': too large");
  const std::string memory = k8s_quantity(base + plan.shm);
  // The sizeLimit is the ceiling the node guard may grow /dev/shm to, as the webhook writes it.
  const std::uint64_t size_limit =
      empty_dir_size_limit(plan.shm, plan.max_shm, base + plan.shm, plan.memory_fraction_max);

  ordered_json env = ordered_json::array();
  NameValues vars = container_env(plan.profile, plan.gpus, plan.workers, plan.batch_size, plan.shm);
  vars.emplace_back(kEnvShmLimit, engine_size(size_limit));
  for (const auto& [name, value] : vars) env.push_back({{"name", name}, {"value", value}});

  ordered_json limits = {{"memory", memory}};
  if (plan.gpus > 0) limits["nvidia.com/gpu"] = std::to_string(plan.gpus);

  ordered_json container;
  container["name"] = o.container;
  container["env"] = env;
  container["resources"] = {{"requests", {{"memory", memory}}}, {"limits", limits}};
  container["volumeMounts"] = ordered_json::array({{{"name", "dshm"}, {"mountPath", "/dev/shm"}}});

  ordered_json spec;
  if (o.runtime_class) spec["runtimeClassName"] = *o.runtime_class;
  spec["containers"] = ordered_json::array({container});
  spec["volumes"] = ordered_json::array(
      {{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", k8s_quantity(size_limit)}}}}});
  return {{"spec", spec}};
}

std::string render_k8s(const K8sOptions& o, const Config& config, const HostInfo& host, const EnvLookup& env) {
  if (o.format != "yaml" && o.format != "json")
    throw usage_error("--format '" + k8s_shown(o.format) + "': expected yaml or json");
  const std::uint64_t gpus = parse_count(o.sizing.gpus.value_or(""), "--gpus", 1024);
  PlanOptions po;
  po.sizing = o.sizing;
  po.sizing.gpus = std::to_string(gpus);
  po.cpus = o.cpus;
  const ShmPlan plan = make_plan(po, config, host, env);
  require_fits(plan);
  if (!is_valid_profile_name(plan.profile))
    throw usage_error("--profile " + k8s_shown(o.sizing.profile.value_or("")) + ": the profile's name '" +
                      k8s_shown(plan.profile) + "' is not a valid profile name; set \"name\" in the file");
  const ordered_json patch = k8s_patch(o, plan);
  if (o.format == "json") return patch.dump(2) + "\n";
  return "# gpu-run-ctl k8s: profile " + plan.profile + ", " + std::to_string(plan.gpus) + " GPU(s), " +
         std::to_string(plan.workers) + " workers x batch " + std::to_string(plan.batch_size) + " per rank: /dev/shm " +
         k8s_quantity(plan.shm) + ", sizeLimit " +
         patch["spec"]["volumes"][0]["emptyDir"]["sizeLimit"].get<std::string>() +
         " (the most gpu-run-ctl guard grows it to)\n" + to_yaml(patch);
}

void run_k8s(const K8sOptions& o) { std::cout << render_k8s(o, load_ctl_config(), probe_host()); }

std::string runtime_class_manifest(const std::string& handler) {
  if (!is_k8s_dns_label(handler))
    throw usage_error("--handler '" + k8s_shown(handler) +
                      "': expected the runtime handler's name in containerd's config (lowercase letters, digits and "
                      "'-', at most 63)");
  ordered_json rc;
  rc["apiVersion"] = "node.k8s.io/v1";
  rc["kind"] = "RuntimeClass";
  rc["metadata"] = {{"name", handler}};
  rc["handler"] = handler;
  return "# gpu-run-ctl k8s runtimeclass: pods with `runtimeClassName: " + handler +
         "` run through the containerd handler " + handler + " (gpu-run-ctl configure containerd on each node)\n" +
         to_yaml(rc);
}

void add_k8s_command(CLI::App& app) {
  auto o = std::make_shared<K8sOptions>();
  CLI::App* cmd = app.add_subcommand("k8s", "Print a pod spec patch giving a container a /dev/shm of the planned size");
  // The pod is described, not this machine: no default profile, a GPU count, CPUs from --cpus.
  const SizingFlagOptions sizing = add_sizing_flags(*cmd, o->sizing);
  // Required unless a subcommand is given (checked in the callback, as CLI11 reports it: CLI11's
  // required() would ask for them with a subcommand too).
  sizing.profile->description("Profile name or path to a .json file (required)");
  sizing.gpus->description("GPUs of the container (nvidia.com/gpu; 0 for none) (required)");
  sizing.workers->description("DataLoader workers per GPU (default: the profile's, or from --cpus)");
  cmd->add_option("--memory", o->memory,
                  "Memory the job needs besides /dev/shm, a Kubernetes quantity (e.g. 16Gi); requests and limits "
                  "are this plus the shm size (default: 4Gi per GPU rank)")
      ->type_name("QUANTITY");
  cmd->add_option("--cpus", o->cpus, "CPUs the pod will have, for workers_per_gpu \"auto\" (default: this machine's)")
      ->type_name("N");
  cmd->add_option("--runtime-class", o->runtime_class, "Set spec.runtimeClassName (e.g. nvidia)")->type_name("NAME");
  cmd->add_option("--container", o->container,
                  "Name of the pod's container to patch (required: strategic merge matches it by name, and adds a "
                  "container it does not find)")
      ->type_name("NAME");
  cmd->add_option("--format", o->format, "yaml or json")->type_name("FORMAT")->capture_default_str();
  cmd->footer(
      "Kubernetes has no shmSize: the working method is an emptyDir with medium Memory and a\n"
      "sizeLimit mounted at /dev/shm. Its pages count against the container's memory limit, so\n"
      "requests.memory and limits.memory are raised by the shm size: they are --memory plus the\n"
      "shm size, or without --memory a stated base of 4Gi per GPU rank (at least one) plus the\n"
      "shm size. The sizeLimit is the ceiling gpu-run-ctl guard may grow /dev/shm to (the\n"
      "smaller of the profile's max_shm and the memory budget); the guard lowers the volume to\n"
      "the plan when the pod starts (the kubelet evicts a pod past its sizeLimit, so it is never\n"
      "grown past it). The container gets GPU_RUN_PROFILE, GPU_RUN_GPUS (with GPUs),\n"
      "GPU_RUN_NUM_WORKERS, GPU_RUN_BATCH_SIZE, GPU_RUN_SHM_SIZE (the plan) and GPU_RUN_SHM_LIMIT\n"
      "(the sizeLimit). The patch is strategic-merge style for a Pod:\n"
      "  kubectl patch --local -f pod.yaml -o yaml \\\n"
      "    -p \"$(gpu-run-ctl k8s --profile imagenet --gpus 2 --container pytorch --format json)\"\n"
      "For a Deployment, Job or StatefulSet wrap it in the pod template:\n"
      "  kubectl patch deployment NAME -p \"{\\\"spec\\\":{\\\"template\\\":$(gpu-run-ctl k8s ... --format json)}}\"\n"
      "(a running Pod's volumes cannot be changed: patch its template, or the manifest before creating it).");
  auto handler = std::make_shared<std::string>("gpu-run");
  CLI::App* rc =
      cmd->add_subcommand("runtimeclass", "Print the RuntimeClass that selects the containerd runtime handler gpu-run");
  rc->add_option("--handler", *handler, "The runtime handler's name (configure containerd --handler)")
      ->type_name("NAME")
      ->capture_default_str();
  rc->footer(
      "Apply it once per cluster (`gpu-run-ctl k8s runtimeclass | kubectl apply -f -`) after\n"
      "`gpu-run-ctl configure containerd` on each node; pods then set `runtimeClassName: gpu-run`.");
  rc->callback([handler] { std::cout << runtime_class_manifest(*handler); });
  add_k8s_webhook_command(*cmd);
  add_k8s_guard_command(*cmd);
  cmd->callback([o, cmd] {
    if (!cmd->get_subcommands().empty()) return;
    for (const auto& [flag, value] : {std::pair{"--profile", &o->sizing.profile}, std::pair{"--gpus", &o->sizing.gpus}})
      if (!*value) throw CLI::RequiredError(flag);
    run_k8s(*o);
  });
}

}  // namespace gpurun
