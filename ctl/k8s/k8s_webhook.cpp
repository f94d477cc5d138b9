#include "ctl/k8s/k8s_webhook.hpp"

#include <arpa/inet.h>
#include <openssl/evp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/base64.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/k8s_quantity.hpp"
#include "ctl/k8s/k8s_guard.hpp"
#include "ctl/k8s/manifest.hpp"
#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr const char* kName = "gpu-run-webhook";
constexpr const char* kTlsSecret = "gpu-run-webhook-tls";
// cert-manager's CA chain: a self-signed Issuer that only makes the CA's Certificate, and an Issuer
// of that CA that signs the serving certificate.
constexpr const char* kSelfSignedIssuer = "gpu-run-webhook-selfsigned";
constexpr const char* kCaName = "gpu-run-webhook-ca";
constexpr int kPort = 8443;
// The pod template's annotation that rolls the Deployment when webhook.json changes.
constexpr const char* kConfigChecksumAnnotation = "gpu-run.io/config-sha256";
constexpr std::size_t kMaxConfigBytes = 1u << 20;

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1)
    throw Error("sha256 of the webhook's config: OpenSSL failed");
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < size; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

ordered_json labels() { return app_labels(kName); }

ordered_json metadata(const std::string& name, const std::string& ns) { return manifest_metadata(name, ns, kName); }

// What the Deployment's pod spec takes from the placement flags, checked.
struct WebhookPlacement {
  ordered_json tolerations = ordered_json::array();
  ordered_json node_selector = ordered_json::object();
  std::string priority_class;
  int replicas = 2;
};

WebhookPlacement webhook_placement(const WebhookManifestOptions& o) {
  WebhookPlacement p;
  for (const std::string& t : o.tolerations) p.tolerations.push_back(parse_toleration(t));
  p.node_selector = parse_label_flags(o.node_selectors, "--node-selector");
  if (!o.priority_class.empty() && !is_dns_subdomain(o.priority_class))
    throw usage_error("--priority-class '" + k8s_shown(o.priority_class) +
                      "': expected a PriorityClass's name (lowercase letters, digits, '-' and '.')");
  p.priority_class = o.priority_class;
  const bool digits =
      !o.replicas.empty() && o.replicas.size() <= 3 && o.replicas.find_first_not_of("0123456789") == std::string::npos;
  p.replicas = digits ? std::stoi(o.replicas) : 0;
  if (p.replicas < 1 || p.replicas > 100)
    throw usage_error("--replicas '" + k8s_shown(o.replicas) + "': expected how many webhook pods run, 1 to 100");
  return p;
}

ordered_json deployment(const std::string& ns, const std::string& image, const ordered_json& pull_secrets,
                        const std::string& config, const WebhookPlacement& placement, const ProfileTree* profiles) {
  const ordered_json probe_https = {{"path", "/healthz"}, {"port", "https"}, {"scheme", "HTTPS"}};
  ordered_json liveness = {{"httpGet", probe_https}, {"periodSeconds", 10}, {"failureThreshold", 3}};
  ordered_json readiness = {{"httpGet", probe_https}, {"periodSeconds", 5}};
  readiness["httpGet"]["path"] = "/readyz";
  ordered_json container = {
      {"name", "webhook"},
      {"image", image},
      {"args",
       {"--listen", "0.0.0.0:" + std::to_string(kPort), "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key",
        "--config", "/config/webhook.json", "--profile-dir", "/profiles"}},
      {"ports", {{{"name", "https"}, {"containerPort", kPort}, {"protocol", "TCP"}}}},
      {"livenessProbe", liveness},
      {"readinessProbe", readiness},
      {"resources",
       // The limit holds --threads (4096) connections at once: bench/webhook/hostile measured 56 KiB
       // a held connection (151 MiB anonymous for 2,737) and a 189 MiB peak; its report prints the
       // peak over this limit (bench/WEBHOOK.md). More connections wait, they never add memory.
       {{"requests", {{"cpu", "50m"}, {"memory", "32Mi"}}}, {"limits", {{"cpu", "1"}, {"memory", "320Mi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"runAsNonRoot", true},
        {"capabilities", {{"drop", {"ALL"}}}}}},
      {"volumeMounts",
       {{{"name", "tls"}, {"mountPath", "/tls"}, {"readOnly", true}},
        {{"name", "config"}, {"mountPath", "/config"}, {"readOnly", true}},
        {{"name", "profiles"}, {"mountPath", "/profiles"}, {"readOnly", true}}}}};
  ordered_json pod_spec = {
      {"automountServiceAccountToken", false},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", 65532},
        {"runAsGroup", 65532},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      // Two replicas on two nodes where there are two.
      {"affinity",
       {{"podAntiAffinity",
         {{"preferredDuringSchedulingIgnoredDuringExecution",
           {{{"weight", 100},
             {"podAffinityTerm",
              {{"labelSelector", {{"matchLabels", labels()}}}, {"topologyKey", "kubernetes.io/hostname"}}}}}}}}}},
      {"containers", {container}},
      {"volumes",
       {{{"name", "tls"}, {"secret", {{"secretName", kTlsSecret}}}},
        {{"name", "config"}, {"configMap", {{"name", kName}}}},
        // Teams' profiles (optional): k8s webhook-manifests --profiles DIR, the tree as it was.
        profiles_volume(profiles)}}};
  if (!pull_secrets.empty()) pod_spec["imagePullSecrets"] = pull_secrets;
  if (!placement.tolerations.empty()) pod_spec["tolerations"] = placement.tolerations;
  if (!placement.node_selector.empty()) pod_spec["nodeSelector"] = placement.node_selector;
  if (!placement.priority_class.empty()) pod_spec["priorityClassName"] = placement.priority_class;
  ordered_json d = manifest_object("apps/v1", "Deployment", metadata(kName, ns));
  // The webhook reads webhook.json at start: a changed config changes the template, which rolls it.
  d["spec"] = {
      {"replicas", placement.replicas},
      {"selector", {{"matchLabels", labels()}}},
      {"template",
       {{"metadata", {{"labels", labels()}, {"annotations", {{kConfigChecksumAnnotation, sha256_hex(config)}}}}},
        {"spec", pod_spec}}}};
  return d;
}

ordered_json webhook_configuration(const std::string& ns, const std::optional<WebhookTlsPair>& tls) {
  ordered_json meta = {{"name", kName}, {"labels", labels()}};
  // The CA's certificate, which stays when the serving certificate is renewed.
  if (!tls) meta["annotations"] = {{"cert-manager.io/inject-ca-from", ns + "/" + kCaName}};
  ordered_json client = {{"service", {{"name", kName}, {"namespace", ns}, {"path", "/mutate"}, {"port", 443}}}};
  if (tls) client["caBundle"] = base64_encode(tls->ca_cert);
  ordered_json hook = {
      {"name", kWebhookName},
      {"admissionReviewVersions", {"v1"}},
      {"sideEffects", "None"},
      // A webhook that is down must not stop pods from starting: they start unsized.
      {"failurePolicy", "Ignore"},
      {"timeoutSeconds", 5},
      {"reinvocationPolicy", "IfNeeded"},
      {"matchPolicy", "Equivalent"},
      {"clientConfig", client},
      {"rules",
       {{{"operations", {"CREATE"}},
         {"apiGroups", {""}},
         {"apiVersions", {"v1"}},
         {"resources", {"pods"}},
         {"scope", "Namespaced"}}}},
      // Only namespaces that opt in, and never the webhook's own (its pods would wait on it).
      {"namespaceSelector",
       {{"matchLabels", {{kWebhookOptInLabel, "enabled"}}},
        {"matchExpressions", {{{"key", "kubernetes.io/metadata.name"}, {"operator", "NotIn"}, {"values", {ns}}}}}}},
      // Only the pods the review would change; the API server calls it for no other (Kubernetes 1.28+).
      {"matchConditions", {{{"name", "asks-for-gpu-run"}, {"expression", kWebhookMatchExpression}}}}};
  ordered_json c = manifest_object("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", meta);
  c["webhooks"] = {hook};
  return c;
}

// Ingress to the webhook's port only (from --apiserver-cidr's blocks, when given), no egress: the
// webhook calls nothing. The API server cannot be named otherwise (it is no pod), and the kubelet's
// probes come from the pod's node, which a NetworkPolicy always admits.
ordered_json network_policy(const std::string& ns, const std::vector<std::string>& cidrs) {
  ordered_json from = ordered_json::array();
  for (const std::string& cidr : cidrs) from.push_back({{"ipBlock", {{"cidr", cidr}}}});
  ordered_json ingress = {{"ports", {{{"protocol", "TCP"}, {"port", kPort}}}}};
  if (!from.empty()) ingress["from"] = from;
  ordered_json p = manifest_object("networking.k8s.io/v1", "NetworkPolicy", metadata(kName, ns));
  p["spec"] = {{"podSelector", {{"matchLabels", labels()}}},
               {"policyTypes", {"Ingress", "Egress"}},
               {"ingress", {ingress}},
               {"egress", ordered_json::array()}};
  return p;
}

// The API server's own series about this webhook: what no metric of the webhook can show, as a
// webhook that is not reached counts nothing.
ordered_json webhook_prometheus_rule(const std::string& ns, const std::string& runbooks) {
  const std::string hook = std::string("name=\"") + kWebhookName + "\", type=\"admit\"";
  const ordered_json open = prometheus_alert(
      "GpuRunWebhookFailingOpen",
      "sum by (name) (increase(apiserver_admission_webhook_fail_open_count{" + hook + "}[5m])) > 0", nullptr, runbooks,
      "pods admitted without gpu-run-webhook's review",
      "The API server could not call webhook {{ $labels.name }} ({{ $value | humanize }} times in 5 minutes) and, "
      "under failurePolicy Ignore, admitted those pods unchanged: their /dev/shm is the runtime's 64 MiB.");
  const ordered_json rejected = prometheus_alert(
      "GpuRunWebhookRejectingPods",
      "sum by (name, error_type) (increase(apiserver_admission_webhook_rejection_count{" + hook +
          ", error_type!=\"no_error\"}[5m])) > 0",
      nullptr, runbooks, "pods refused because gpu-run-webhook failed",
      "The API server refused pods ({{ $value | humanize }} in 5 minutes) because webhook {{ $labels.name }} failed "
      "({{ $labels.error_type }}): a failurePolicy of Fail, or a patch it could not apply.");
  ordered_json rule = manifest_object("monitoring.coreos.com/v1", "PrometheusRule", metadata(kName, ns));
  rule["spec"] = {{"groups", {{{"name", kName}, {"rules", {open, rejected}}}}}};
  return rule;
}

// cert-manager's objects: the CA made once by a self-signed Issuer (its key kept on renewal), and
// the serving certificate signed by that CA, so the injected caBundle (the CA) outlives renewals.
void cert_manager_objects(const std::string& ns, std::vector<ordered_json>& out) {
  ordered_json self_signed = manifest_object("cert-manager.io/v1", "Issuer", metadata(kSelfSignedIssuer, ns));
  self_signed["spec"] = {{"selfSigned", ordered_json::object()}};
  out.push_back(self_signed);
  ordered_json ca = manifest_object("cert-manager.io/v1", "Certificate", metadata(kCaName, ns));
  ca["spec"] = {{"isCA", true},
                {"commonName", std::string(kName) + " CA"},
                {"secretName", kCaName},
                {"duration", "87600h"},
                {"privateKey", {{"algorithm", "ECDSA"}, {"size", 256}, {"rotationPolicy", "Never"}}},
                {"issuerRef", {{"name", kSelfSignedIssuer}, {"kind", "Issuer"}}}};
  out.push_back(ca);
  ordered_json issuer = manifest_object("cert-manager.io/v1", "Issuer", metadata(kName, ns));
  issuer["spec"] = {{"ca", {{"secretName", kCaName}}}};
  out.push_back(issuer);
  ordered_json cert = manifest_object("cert-manager.io/v1", "Certificate", metadata(kName, ns));
  cert["spec"] = {{"secretName", kTlsSecret},
                  {"dnsNames", webhook_dns_names(ns)},
                  {"usages", {"digital signature", "server auth"}},
                  {"privateKey", {{"algorithm", "ECDSA"}, {"size", 256}, {"rotationPolicy", "Always"}}},
                  {"issuerRef", {{"name", kName}, {"kind", "Issuer"}}}};
  out.push_back(cert);
}

}  // namespace

const char* const kWebhookMatchExpression =
    "(has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.startsWith('gpu-run.') || "
    "k == 'io.kubernetes.cri-o.ShmSize')) || object.spec.containers.exists(c, has(c.resources) && "
    "((has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits) || (has(c.resources.requests) && "
    "'nvidia.com/gpu' in c.resources.requests)))";

void check_cidr(const std::string& cidr) {
  const auto slash = cidr.find('/');
  const std::string address = cidr.substr(0, slash);
  const std::string prefix = slash == std::string::npos ? "" : cidr.substr(slash + 1);
  unsigned char buf[16];
  const bool v4 = inet_pton(AF_INET, address.c_str(), buf) == 1;
  const bool v6 = !v4 && inet_pton(AF_INET6, address.c_str(), buf) == 1;
  const bool digits =
      !prefix.empty() && prefix.size() <= 3 && prefix.find_first_not_of("0123456789") == std::string::npos;
  const int bits = digits ? std::stoi(prefix) : -1;
  if (!(v4 || v6) || bits < 0 || bits > (v4 ? 32 : 128))
    throw usage_error("--apiserver-cidr '" + k8s_shown(cidr) +
                      "': expected an address block as ADDRESS/BITS (e.g. 10.0.0.0/28, the control plane's addresses)");
}

std::vector<std::string> webhook_dns_names(const std::string& ns) {
  const std::string svc = std::string(kName) + "." + ns;
  return {svc + ".svc", svc, svc + ".svc.cluster.local"};
}

std::vector<ordered_json> webhook_manifests(const WebhookManifestOptions& o, const std::optional<WebhookTlsPair>& tls,
                                            const std::string& config, const ProfileTree* profiles) {
  const std::string& ns = o.namespace_name;
  check_manifest_namespace(ns);
  const std::string image = manifest_image(o.image, kDefaultWebhookImage);
  const ordered_json pull_secrets = image_pull_secrets(o.image_pull_secrets, "the webhook's");
  const WebhookPlacement placement = webhook_placement(o);
  parse_webhook_config(config, o.config_file.value_or("the default webhook.json"));
  for (const std::string& cidr : o.apiserver_cidrs) check_cidr(cidr);
  const ordered_json extra_labels = parse_label_flags(o.labels, "--label");
  check_runbook_url(o.runbook_url);

  std::vector<ordered_json> out;
  // The webhook's pod meets Pod Security's "restricted": the namespace enforces it.
  ordered_json ns_labels = labels();
  for (const char* mode : {"enforce", "audit", "warn"})
    ns_labels[std::string("pod-security.kubernetes.io/") + mode] = "restricted";
  out.push_back(manifest_object("v1", "Namespace", {{"name", ns}, {"labels", ns_labels}}));
  ordered_json config_map = manifest_object("v1", "ConfigMap", metadata(kName, ns));
  config_map["data"] = {{"webhook.json", config.empty() || config.back() != '\n' ? config + "\n" : config}};
  out.push_back(config_map);
  if (tls) {
    ordered_json secret = manifest_object("v1", "Secret", metadata(kTlsSecret, ns));
    secret["type"] = "kubernetes.io/tls";
    secret["data"] = {{"tls.crt", base64_encode(tls->cert)},
                      {"tls.key", base64_encode(tls->key)},
                      {"ca.crt", base64_encode(tls->ca_cert)}};
    out.push_back(secret);
  } else {
    cert_manager_objects(ns, out);
  }
  if (profiles) out.push_back(profiles_config_map(*profiles, ns, kName));
  out.push_back(
      deployment(ns, image, pull_secrets, config_map["data"]["webhook.json"].get<std::string>(), placement, profiles));
  ordered_json service = manifest_object("v1", "Service", metadata(kName, ns));
  service["spec"] = {{"selector", labels()},
                     {"ports", {{{"name", "https"}, {"port", 443}, {"targetPort", "https"}, {"protocol", "TCP"}}}}};
  out.push_back(service);
  ordered_json pdb = manifest_object("policy/v1", "PodDisruptionBudget", metadata(kName, ns));
  // A replica that is not ready (crash-looping) may be evicted, so it never blocks a node drain.
  pdb["spec"] = {
      {"minAvailable", 1}, {"selector", {{"matchLabels", labels()}}}, {"unhealthyPodEvictionPolicy", "AlwaysAllow"}};
  out.push_back(pdb);
  out.push_back(network_policy(ns, o.apiserver_cidrs));
  out.push_back(webhook_configuration(ns, tls));
  if (!o.no_monitoring) out.push_back(webhook_prometheus_rule(ns, o.runbook_url));
  add_object_labels(out, extra_labels);
  return out;
}

std::string render_webhook_manifests(const WebhookManifestOptions& o, const std::optional<WebhookTlsPair>& tls,
                                     const std::string& config, const ProfileTree* profiles) {
  const std::vector<ordered_json> objects = webhook_manifests(o, tls, config, profiles);
  const std::string header =
      "# gpu-run-webhook in namespace " + o.namespace_name + " (gpu-run-ctl k8s webhook-manifests" +
      (tls ? " --self-signed" : " --cert-manager") +
      ").\n"
      "# Pods are sent to it from namespaces labelled " +
      kWebhookOptInLabel +
      "=enabled, when they ask (a\n"
      "# gpu-run.* annotation) or request nvidia.com/gpu (matchConditions, Kubernetes 1.28 or later):\n"
      "#   kubectl label namespace NS " +
      kWebhookOptInLabel + "=enabled\n" +
      (tls ? "# The Secret holds the serving key: keep this output private.\n"
           : "# Needs cert-manager: a CA made by a self-signed Issuer signs the serving certificate; the CA is\n"
             "# injected as the caBundle.\n") +
      (o.no_monitoring ? "" : "# The PrometheusRule needs prometheus-operator's CRDs (else --no-monitoring).\n") +
      (profiles ? "# The teams' profiles (--profiles, " + std::to_string(profiles->size()) +
                      (profiles->size() == 1 ? " file" : " files") +
                      "): the ConfigMap gpu-run-profiles, mounted at /profiles as the same tree.\n"
                : std::string("# Teams' profiles: none in this output (--profiles DIR ships them as the ConfigMap "
                              "gpu-run-profiles).\n"));
  return render_manifest_stream(header, objects);
}

void run_webhook_manifests(const WebhookManifestOptions& o) {
  if (o.cert_manager == o.self_signed_dir.has_value())
    throw usage_error("k8s webhook-manifests: choose the certificate set-up: --cert-manager or --self-signed DIR");
  std::string config = kDefaultWebhookConfig;
  if (o.config_file) {
    try {
      config = read_small_file(*o.config_file, kMaxConfigBytes, "--config: read the webhook's config");
    } catch (const Error& e) {
      throw e.with_exit_code(kExitUsage);  // the path a person gave
    }
  }
  webhook_manifests(o, std::nullopt, config);  // the options, before any file is read or written
  std::optional<ProfileTree> profiles;
  if (o.profiles_dir) profiles = read_profile_tree(*o.profiles_dir, builtin_profile_dir());
  std::optional<WebhookTlsPair> tls;
  if (o.self_signed_dir) {
    bool renewed = false;
    tls = webhook_tls_pair_in(*o.self_signed_dir, std::string(kName) + " CA", webhook_dns_names(o.namespace_name),
                              &renewed);
    if (renewed)
      std::cerr << "gpu-run-ctl: k8s webhook-manifests: the pair in " << *o.self_signed_dir << " ended or ends within "
                << kWebhookRenewDays
                << " days: made a new CA and serving certificate there; apply this output to roll out both the "
                   "Secret and the caBundle\n";
  }
  std::cout << render_webhook_manifests(o, tls, config, profiles ? &*profiles : nullptr);
}

void add_k8s_webhook_command(CLI::App& k8s) {
  auto o = std::make_shared<WebhookManifestOptions>();
  CLI::App* cmd = k8s.add_subcommand(
      "webhook-manifests",
      "Print the Kubernetes objects that run gpu-run-webhook: Deployment, Service, webhook configuration, "
      "PodDisruptionBudget, NetworkPolicy, certificates, PrometheusRule");
  add_namespace_and_image_options(*cmd, o->namespace_name, o->image, "the webhook",
                                  "The webhook's image (default: " + kDefaultWebhookImage + ")");
  cmd->add_option("--toleration", o->tolerations,
                  "A taint the webhook's pods tolerate (repeatable): KEY=VALUE:EFFECT, KEY:EFFECT, KEY, or all")
      ->type_name("TOLERATION");
  cmd->add_option("--node-selector", o->node_selectors, "Run only on nodes with this label (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_option("--priority-class", o->priority_class, "The webhook's PriorityClass (default: none)")
      ->type_name("NAME");
  cmd->add_option("--replicas", o->replicas, "How many webhook pods run (spread over nodes where they can)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--image-pull-secret", o->image_pull_secrets,
                  "A Secret in the webhook's namespace to pull the image with (repeatable)")
      ->type_name("NAME");
  CLI::Option* cm = cmd->add_flag("--cert-manager", o->cert_manager,
                                  "Certificates from cert-manager: a CA (made by a self-signed Issuer) whose Issuer "
                                  "signs the serving Certificate, the CA injected as the caBundle");
  cmd->add_option("--self-signed", o->self_signed_dir,
                  "Make a CA and a serving certificate in DIR (ca.crt, tls.crt, tls.key; reused when there, made "
                  "anew within 30 days of their end) and print the Secret and the caBundle")
      ->type_name("DIR")
      ->excludes(cm);
  cmd->add_option("--config", o->config_file,
                  "The webhook's config (webhook.json: policy, memory_fraction_max, default_cpus, namespace_profiles) "
                  "for its ConfigMap; a change rolls the Deployment")
      ->type_name("FILE");
  cmd->add_option("--apiserver-cidr", o->apiserver_cidrs,
                  "Admit connections to the webhook only from this address block, the API server's (repeatable; "
                  "default: any source, to the webhook's port only)")
      ->type_name("CIDR");
  cmd->add_option("--label", o->labels,
                  "A label on every object, e.g. the one your Prometheus selects rules by (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--no-monitoring", o->no_monitoring,
                "No PrometheusRule (a cluster without prometheus-operator's CRDs)");
  cmd->add_option("--profiles", o->profiles_dir,
                  "The teams' profiles (NAME.json, TEAM/NAME.json) as the ConfigMap gpu-run-profiles, mounted at "
                  "/profiles as the same tree; each is checked first")
      ->type_name("DIR");
  cmd->add_option("--runbook-url", o->runbook_url,
                  "docs/kubernetes.md as your team serves it: each alert's runbook_url is its section there")
      ->type_name("URL")
      ->capture_default_str();
  cmd->footer(
      "One of --cert-manager or --self-signed DIR. Apply with: gpu-run-ctl k8s webhook-manifests ... | kubectl "
      "apply -f -\n"
      "Then opt namespaces in: kubectl label namespace NS gpu-run.io/webhook=enabled\n"
      "Teams' profiles: --profiles DIR ships NAME.json and TEAM/NAME.json as the ConfigMap gpu-run-profiles, "
      "mounted at /profiles as the same tree.");
  cmd->callback([o] { run_webhook_manifests(*o); });
}

}  // namespace gpurun
