#include "k8s_webhook.hpp"

#include <openssl/evp.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "error.hpp"
#include "manifest.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr const char* kName = "gpu-run-webhook";
constexpr const char* kTlsSecret = "gpu-run-webhook-tls";
constexpr const char* kWebhookName = "shm.gpu-run.io";
constexpr int kPort = 8443;

// The webhook's own config (webhook/webhook_config.hpp, gpu-run-webhook(1)), as the ConfigMap ships it.
constexpr const char* kDefaultConfig =
    R"({"policy": "raise", "memory_fraction_max": 0.5, "default_cpus": 1, "namespace_profiles": {}})";

std::string base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

ordered_json labels() { return app_labels(kName); }

ordered_json metadata(const std::string& name, const std::string& ns) { return manifest_metadata(name, ns, kName); }

ordered_json deployment(const std::string& ns, const std::string& image) {
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
       {{"requests", {{"cpu", "50m"}, {"memory", "32Mi"}}}, {"limits", {{"cpu", "1"}, {"memory", "128Mi"}}}}},
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
        // Teams' profiles: kubectl create configmap gpu-run-profiles --from-file=DIR (optional).
        {{"name", "profiles"}, {"configMap", {{"name", kProfilesConfigMap}, {"optional", true}}}}}}};
  ordered_json d = manifest_object("apps/v1", "Deployment", metadata(kName, ns));
  d["spec"] = {{"replicas", 2},
               {"selector", {{"matchLabels", labels()}}},
               {"template", {{"metadata", {{"labels", labels()}}}, {"spec", pod_spec}}}};
  return d;
}

ordered_json webhook_configuration(const std::string& ns, const std::optional<WebhookTlsPair>& tls) {
  ordered_json meta = {{"name", kName}, {"labels", labels()}};
  if (!tls) meta["annotations"] = {{"cert-manager.io/inject-ca-from", ns + "/" + kName}};
  ordered_json client = {{"service", {{"name", kName}, {"namespace", ns}, {"path", "/mutate"}, {"port", 443}}}};
  if (tls) client["caBundle"] = base64(tls->ca_cert);
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
        {"matchExpressions", {{{"key", "kubernetes.io/metadata.name"}, {"operator", "NotIn"}, {"values", {ns}}}}}}}};
  ordered_json c = manifest_object("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", meta);
  c["webhooks"] = {hook};
  return c;
}

}  // namespace

std::vector<std::string> webhook_dns_names(const std::string& ns) {
  const std::string svc = std::string(kName) + "." + ns;
  return {svc + ".svc", svc, svc + ".svc.cluster.local"};
}

std::vector<ordered_json> webhook_manifests(const WebhookManifestOptions& o, const std::optional<WebhookTlsPair>& tls) {
  const std::string& ns = o.namespace_name;
  check_manifest_namespace(ns);
  const std::string image = manifest_image(o.image, kDefaultWebhookImage);

  std::vector<ordered_json> out;
  out.push_back(manifest_object("v1", "Namespace", {{"name", ns}, {"labels", labels()}}));
  ordered_json config = manifest_object("v1", "ConfigMap", metadata(kName, ns));
  config["data"] = {{"webhook.json", std::string(kDefaultConfig) + "\n"}};
  out.push_back(config);
  if (tls) {
    ordered_json secret = manifest_object("v1", "Secret", metadata(kTlsSecret, ns));
    secret["type"] = "kubernetes.io/tls";
    secret["data"] = {{"tls.crt", base64(tls->cert)}, {"tls.key", base64(tls->key)}, {"ca.crt", base64(tls->ca_cert)}};
    out.push_back(secret);
  } else {
    ordered_json issuer = manifest_object("cert-manager.io/v1", "Issuer", metadata(kName, ns));
    issuer["spec"] = {{"selfSigned", ordered_json::object()}};
    out.push_back(issuer);
    ordered_json cert = manifest_object("cert-manager.io/v1", "Certificate", metadata(kName, ns));
    cert["spec"] = {{"secretName", kTlsSecret},
                    {"dnsNames", webhook_dns_names(ns)},
                    {"privateKey", {{"algorithm", "ECDSA"}, {"size", 256}, {"rotationPolicy", "Always"}}},
                    {"issuerRef", {{"name", kName}, {"kind", "Issuer"}}}};
    out.push_back(cert);
  }
  out.push_back(deployment(ns, image));
  ordered_json service = manifest_object("v1", "Service", metadata(kName, ns));
  service["spec"] = {{"selector", labels()},
                     {"ports", {{{"name", "https"}, {"port", 443}, {"targetPort", "https"}, {"protocol", "TCP"}}}}};
  out.push_back(service);
  ordered_json pdb = manifest_object("policy/v1", "PodDisruptionBudget", metadata(kName, ns));
  pdb["spec"] = {{"minAvailable", 1}, {"selector", {{"matchLabels", labels()}}}};
  out.push_back(pdb);
  out.push_back(webhook_configuration(ns, tls));
  return out;
}

std::string render_webhook_manifests(const WebhookManifestOptions& o, const std::optional<WebhookTlsPair>& tls) {
  const std::vector<ordered_json> objects = webhook_manifests(o, tls);
  const std::string header = "# gpu-run-webhook in namespace " + o.namespace_name +
                             " (gpu-run-ctl k8s webhook-manifests" + (tls ? " --self-signed" : " --cert-manager") +
                             ").\n"
                             "# Pods are sent to it from namespaces labelled " +
                             kWebhookOptInLabel +
                             "=enabled:\n"
                             "#   kubectl label namespace NS " +
                             kWebhookOptInLabel + "=enabled\n" +
                             (tls ? "# The Secret holds the serving key: keep this output private.\n"
                                  : "# Needs cert-manager (the Issuer and Certificate; the caBundle is injected).\n");
  return render_manifest_stream(header, objects);
}

void run_webhook_manifests(const WebhookManifestOptions& o) {
  if (o.cert_manager == o.self_signed_dir.has_value())
    throw usage_error("k8s webhook-manifests: choose the certificate set-up: --cert-manager or --self-signed DIR");
  std::optional<WebhookTlsPair> tls;
  if (o.self_signed_dir) {
    webhook_manifests(o, std::nullopt);  // the options, before any file is written
    bool renewed = false;
    tls = webhook_tls_pair_in(*o.self_signed_dir, std::string(kName) + " CA", webhook_dns_names(o.namespace_name),
                              &renewed);
    if (renewed)
      std::cerr << "gpu-run-ctl: k8s webhook-manifests: the pair in " << *o.self_signed_dir << " ended or ends within "
                << kWebhookRenewDays
                << " days: made a new CA and serving certificate there; apply this output to roll out both the "
                   "Secret and the caBundle\n";
  }
  std::cout << render_webhook_manifests(o, tls);
}

void add_k8s_webhook_command(CLI::App& k8s) {
  auto o = std::make_shared<WebhookManifestOptions>();
  CLI::App* cmd = k8s.add_subcommand(
      "webhook-manifests",
      "Print the Kubernetes objects that run gpu-run-webhook: Deployment, Service, webhook configuration, "
      "PodDisruptionBudget, certificates");
  cmd->add_option("--namespace", o->namespace_name, "Namespace to run the webhook in")
      ->type_name("NS")
      ->capture_default_str();
  cmd->add_option("--image", o->image, "The webhook's image (default: " + kDefaultWebhookImage + ")")
      ->type_name("IMAGE");
  CLI::Option* cm = cmd->add_flag("--cert-manager", o->cert_manager,
                                  "Certificates from cert-manager: a self-signed Issuer, a "
                                  "Certificate, the caBundle injected by its annotation");
  cmd->add_option("--self-signed", o->self_signed_dir,
                  "Make a CA and a serving certificate in DIR (ca.crt, tls.crt, tls.key; reused when there, made "
                  "anew within 30 days of their end) and print the Secret and the caBundle")
      ->type_name("DIR")
      ->excludes(cm);
  cmd->footer(
      "One of --cert-manager or --self-signed DIR. Apply with: gpu-run-ctl k8s webhook-manifests ... | kubectl "
      "apply -f -\n"
      "Then opt namespaces in: kubectl label namespace NS gpu-run.io/webhook=enabled\n"
      "Teams' profiles: kubectl -n NS create configmap gpu-run-profiles --from-file=DIR (mounted at /profiles).");
  cmd->callback([o] { run_webhook_manifests(*o); });
}

}  // namespace gpurun
