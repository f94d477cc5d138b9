#include "ctl/k8s/k8s.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/k8s/k8s_guard.hpp"
#include "ctl/k8s/k8s_node.hpp"
#include "ctl/k8s/k8s_profiles.hpp"
#include "ctl/k8s/k8s_webhook.hpp"
#include "ctl/k8s/pod_templates.hpp"
#include "ctl/k8s/yaml.hpp"
#include "decision/contract.hpp"
#include "profiles/profile.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

// The largest manifest k8s -f reads.
constexpr std::size_t kMaxManifestBytes = 64u << 20;

// One line per template for the person running it; throws for one the webhook would deny.
void note_reviews(const std::vector<TemplateReview>& reviews, const std::string& where, K8sResult& result) {
  for (const TemplateReview& t : reviews) {
    const std::string which = t.object + (t.where.empty() ? "" : " " + t.where);
    const PodReview& r = t.review;
    if (r.outcome == ReviewOutcome::kDenied) throw usage_error(where + ": " + which + ": " + r.reason);
    if (r.outcome == ReviewOutcome::kPatched)
      result.notes.push_back(which + ": /dev/shm " + k8s_quantity(r.size) + " for " + r.containers +
                             (r.default_profile_used.empty() ? "" : " (profile " + r.default_profile_used + ")"));
    for (const std::string& line : r.warnings) result.notes.push_back("warning: " + which + ": " + line);
    if (r.outcome != ReviewOutcome::kPatched)
      result.notes.push_back((r.outcome == ReviewOutcome::kWarned ? "warning: " : "") + which +
                             ": unchanged: " + r.reason);
  }
}

bool patched_any(const std::vector<TemplateReview>& reviews) {
  for (const TemplateReview& t : reviews)
    if (t.review.outcome == ReviewOutcome::kPatched) return true;
  return false;
}

std::size_t line_at(const std::string& text, std::size_t offset) {
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// A JSON value written as its original was: on one line, or indented as its second line is.
std::string json_like(const ordered_json& value, const std::string& original) {
  const auto nl = original.find('\n');
  if (nl == std::string::npos) return value.dump();
  const auto indent = original.find_first_not_of(' ', nl + 1);
  return value.dump(indent == std::string::npos ? 2 : static_cast<int>(indent - nl - 1));
}

K8sResult render_json(const std::string& text, const std::string& source, const WebhookConfig& config,
                      const ProfileStore& store, const std::string* default_profile) {
  K8sResult result;
  std::istringstream in(text);
  std::size_t done = 0;  // text up to here is in the result
  for (;;) {
    in >> std::ws;
    if (in.peek() == std::char_traits<char>::eof()) break;
    const auto begin = static_cast<std::size_t>(in.tellg());
    ordered_json value;
    try {
      in >> value;
    } catch (const nlohmann::json::parse_error& e) {
      throw usage_error(source + ":" + std::to_string(line_at(text, begin)) + ": not JSON: " + e.what());
    }
    in.clear();
    const auto end = in.tellg() < 0 ? text.size() : static_cast<std::size_t>(in.tellg());
    const std::string where = source + ":" + std::to_string(line_at(text, begin));
    const std::vector<TemplateReview> reviews = review_pod_templates(value, config, store, default_profile);
    note_reviews(reviews, where, result);
    result.manifest += text.substr(done, begin - done);
    const std::string original = text.substr(begin, end - begin);
    result.manifest += patched_any(reviews) ? json_like(value, original) : original;
    done = end;
  }
  result.manifest += text.substr(done);
  return result;
}

K8sResult render_yaml(const std::string& text, const std::string& source, const WebhookConfig& config,
                      const ProfileStore& store, const std::string* default_profile) {
  K8sResult result;
  for (const YamlDocumentText& doc : split_yaml_documents(text)) {
    ordered_json value = yaml_document_value(doc.text, source, doc.line);
    const std::vector<TemplateReview> reviews = review_pod_templates(value, config, store, default_profile);
    note_reviews(reviews, source + ":" + std::to_string(doc.line), result);
    result.manifest += patched_any(reviews) ? rewrite_yaml_document(doc.text, value) : doc.text;
  }
  return result;
}

std::string read_manifest(const std::string& filename) {
  if (filename != "-") {
    try {
      return read_small_file(filename, kMaxManifestBytes, "-f: read the manifest");
    } catch (const Error& e) {
      throw e.with_exit_code(kExitUsage);  // the path a person gave
    }
  }
  std::string text;
  char buffer[65536];
  while (std::cin.read(buffer, sizeof buffer) || std::cin.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(std::cin.gcount()));
    if (text.size() > kMaxManifestBytes)
      throw usage_error("-f -: the manifest on stdin is larger than " + std::to_string(kMaxManifestBytes >> 20) +
                        " MiB");
  }
  return text;
}

}  // namespace

K8sResult render_k8s(const std::string& text, const std::string& source, const WebhookConfig& config,
                     const ProfileStore& store, const std::string* default_profile) {
  const auto first = text.find_first_not_of(" \t\r\n");
  // kubectl's rule: JSON when it starts with '{' (or '[', which YAML would read as a list).
  if (first != std::string::npos && (text[first] == '{' || text[first] == '['))
    return render_json(text, source, config, store, default_profile);
  return render_yaml(text, source, config, store, default_profile);
}

void run_k8s(const K8sOptions& o) {
  const Config host_config = load_ctl_config();
  const ProfileStore store = ctl_store(o.profile_dirs, host_config);
  if (o.profile) {
    // Pods name profiles, as the webhook looks them up: a name, not a path.
    if (!is_valid_profile_name(*o.profile))
      throw usage_error("--profile '" + k8s_shown(*o.profile) +
                        "': expected a profile's name (pods name profiles; --profile-dir DIR adds a directory)");
    try {
      store.load(*o.profile, /*allow_path=*/false);
    } catch (const Error& e) {
      throw e.with_context("--profile").with_exit_code(kExitUsage);
    }
  }
  const std::string source = o.filename == "-" ? "<stdin>" : o.filename;
  const K8sResult r =
      render_k8s(read_manifest(o.filename), source, WebhookConfig{}, store, o.profile ? &*o.profile : nullptr);
  for (const std::string& note : r.notes) std::cerr << "gpu-run-ctl: k8s: " << note << "\n";
  std::cout << r.manifest;
}

std::string runtime_node_label(const std::string& handler) { return std::string(kRuntimeNodeLabel) + "=" + handler; }

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
  // Pods of this class go only to nodes whose containerd has the handler (else they fail to start).
  rc["scheduling"] = {{"nodeSelector", {{kRuntimeNodeLabel, handler}}}};
  return "# gpu-run-ctl k8s runtimeclass: pods with `runtimeClassName: " + handler +
         "` run through the containerd handler " + handler +
         " (gpu-run-ctl configure containerd on each node), on nodes labelled " + runtime_node_label(handler) + "\n" +
         to_yaml(rc);
}

void add_k8s_command(CLI::App& app) {
  auto o = std::make_shared<K8sOptions>();
  CLI::App* cmd = app.add_subcommand(
      "k8s", "Print a manifest with every pod template given /dev/shm as gpu-run-webhook gives a pod (-f MANIFEST)");
  cmd->add_option("-f,--filename", o->filename,
                  "The manifest (YAML or JSON; - for stdin): Pods, Deployments, StatefulSets, DaemonSets, "
                  "ReplicaSets, Jobs, CronJobs, Kubeflow training jobs, Lists of them; other objects pass through")
      ->type_name("MANIFEST");
  cmd->add_option("--profile", o->profile,
                  "Profile of a pod template without a gpu-run.profile annotation (a name; then only its containers "
                  "that request nvidia.com/gpu are sized, as under the webhook's namespace_profiles)")
      ->type_name("NAME");
  cmd->add_option("--profile-dir", o->profile_dirs, "Look up profiles here first (repeatable)")->type_name("DIR");
  cmd->footer(
      "Kubernetes has no shmSize: each pod template gets what gpu-run-webhook's review gives a pod, an\n"
      "emptyDir of medium Memory at /dev/shm (its sizeLimit the most gpu-run-ctl guard may grow it to),\n"
      "the GPU_RUN_* env, and the memory limit and request raised by the shm (never lowered). The\n"
      "pod's own annotations (gpu-run.profile, gpu-run.workers, ...), nvidia.com/gpu and CPU limits\n"
      "decide, never this machine. A YAML document without a sized template is printed as it was;\n"
      "a sized one is written anew (comments inside it are lost). Notes go to stderr.\n"
      "  gpu-run-ctl k8s -f train.yaml > train-sized.yaml\n"
      "  kubectl get deployment NAME -o yaml | gpu-run-ctl k8s -f - | kubectl apply -f -");
  // The flag-only form -f replaced (docs/kubernetes.md, "Why the flag-only form went"): its flags,
  // hidden from --help, are answered with the form that replaced it rather than CLI11's "not expected".
  auto removed = std::make_shared<std::vector<std::string>>();
  for (const char* flag : {"--gpus", "--workers", "--batch-size", "--prefetch-factor", "--memory", "--cpus",
                           "--container", "--runtime-class", "--format"})
    cmd->add_option_function<std::string>(flag, [removed, flag](const std::string&) { removed->push_back(flag); })
        ->group("");
  auto handler = std::make_shared<std::string>("gpu-run");
  CLI::App* rc =
      cmd->add_subcommand("runtimeclass", "Print the RuntimeClass that selects the containerd runtime handler gpu-run");
  rc->add_option("--handler", *handler, "The runtime handler's name (configure containerd --handler)")
      ->type_name("NAME")
      ->capture_default_str();
  rc->footer(
      "Apply it once per cluster (`gpu-run-ctl k8s runtimeclass | kubectl apply -f -`) after\n"
      "`gpu-run-ctl configure containerd` on each node and `kubectl label node NODE gpu-run.io/runtime=gpu-run`;\n"
      "pods then set `runtimeClassName: gpu-run` and are scheduled only onto the labelled nodes.");
  rc->callback([handler] { std::cout << runtime_class_manifest(*handler); });
  add_k8s_webhook_command(*cmd);
  add_k8s_guard_command(*cmd);
  add_k8s_node_command(*cmd);
  add_k8s_profiles_config_map_command(*cmd);
  cmd->callback([o, cmd, removed] {
    if (!removed->empty()) {
      std::string flags;
      for (std::size_t i = 0; i < removed->size(); ++i)
        flags += (i == 0 ? "" : i + 1 == removed->size() ? " and " : ", ") + (*removed)[i];
      throw usage_error("k8s: " + flags + (removed->size() > 1 ? " were" : " was") +
                        " removed with the flag-only form: k8s now sizes each pod template of a manifest from its "
                        "own nvidia.com/gpu, limits and gpu-run.* annotations: gpu-run-ctl k8s -f MANIFEST (--profile "
                        "NAME for templates without a gpu-run.profile annotation; docs/kubernetes.md)");
    }
    if (!cmd->get_subcommands().empty()) return;
    if (o->filename.empty())
      throw usage_error(
          "k8s: give the manifest to size: -f FILE, or -f - for stdin (e.g. kubectl get deployment NAME -o yaml | "
          "gpu-run-ctl k8s -f -)");
    run_k8s(*o);
  });
}

}  // namespace gpurun
