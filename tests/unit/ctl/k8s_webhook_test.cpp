#include "ctl/k8s/k8s_webhook.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

const ordered_json& find(const std::vector<ordered_json>& objects, const std::string& kind) {
  for (const ordered_json& o : objects)
    if (o["kind"] == kind) return o;
  static const ordered_json none;
  ADD_FAILURE() << "no " << kind;
  return none;
}

std::vector<std::string> kinds(const std::vector<ordered_json>& objects) {
  std::vector<std::string> out;
  for (const ordered_json& o : objects) out.push_back(o["kind"]);
  return out;
}

const ordered_json& named(const std::vector<ordered_json>& objects, const std::string& kind, const std::string& name) {
  for (const ordered_json& o : objects)
    if (o["kind"] == kind && o["metadata"]["name"] == name) return o;
  static const ordered_json none;
  ADD_FAILURE() << "no " << kind << " " << name;
  return none;
}

TEST(WebhookManifestsTest, CertManagerSetUpIsACaChain) {
  WebhookManifestOptions o;
  o.namespace_name = "shm";
  o.cert_manager = true;
  const auto objects = webhook_manifests(o, std::nullopt);
  EXPECT_EQ(kinds(objects),
            (std::vector<std::string>{"Namespace", "ConfigMap", "Issuer", "Certificate", "Issuer", "Certificate",
                                      "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy",
                                      "MutatingWebhookConfiguration", "PrometheusRule"}));
  // The self-signed Issuer makes only the CA; the CA's Issuer signs the serving certificate.
  EXPECT_TRUE(named(objects, "Issuer", "gpu-run-webhook-selfsigned")["spec"].contains("selfSigned"));
  const ordered_json& ca = named(objects, "Certificate", "gpu-run-webhook-ca");
  EXPECT_EQ(ca["spec"]["isCA"], true);
  EXPECT_EQ(ca["spec"]["issuerRef"]["name"], "gpu-run-webhook-selfsigned");
  EXPECT_EQ(ca["spec"]["privateKey"]["rotationPolicy"], "Never") << "a renewed CA keeps its key";
  EXPECT_EQ(named(objects, "Issuer", "gpu-run-webhook")["spec"]["ca"]["secretName"], ca["spec"]["secretName"]);
  const ordered_json& cert = named(objects, "Certificate", "gpu-run-webhook");
  EXPECT_EQ(cert["metadata"]["namespace"], "shm");
  EXPECT_EQ(cert["spec"]["secretName"], "gpu-run-webhook-tls");
  EXPECT_EQ(cert["spec"]["dnsNames"][0], "gpu-run-webhook.shm.svc");
  EXPECT_EQ(cert["spec"]["issuerRef"]["name"], "gpu-run-webhook");
  EXPECT_EQ(cert["spec"]["privateKey"]["algorithm"], "ECDSA");
  const ordered_json& hooks = find(objects, "MutatingWebhookConfiguration");
  EXPECT_EQ(hooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "shm/gpu-run-webhook-ca")
      << "the caBundle is the CA, which a renewed serving certificate keeps";
  const ordered_json& hook = hooks["webhooks"][0];
  EXPECT_FALSE(hook["clientConfig"].contains("caBundle"));
  EXPECT_EQ(hook["clientConfig"]["service"]["namespace"], "shm");
  EXPECT_EQ(hook["admissionReviewVersions"], ordered_json::array({"v1"}));
  EXPECT_EQ(hook["sideEffects"], "None");
  EXPECT_EQ(hook["failurePolicy"], "Ignore");
  EXPECT_EQ(hook["timeoutSeconds"], 5);
  EXPECT_EQ(hook["rules"][0]["operations"], ordered_json::array({"CREATE"}));
  EXPECT_EQ(hook["rules"][0]["resources"], ordered_json::array({"pods"}));
  EXPECT_EQ(hook["namespaceSelector"]["matchLabels"]["gpu-run.io/webhook"], "enabled");
  EXPECT_EQ(hook["namespaceSelector"]["matchExpressions"][0]["values"], ordered_json::array({"shm"}));
  EXPECT_EQ(hook["matchConditions"][0]["expression"], kWebhookMatchExpression);
}

TEST(WebhookManifestsTest, ForRealClusters) {
  WebhookManifestOptions o;
  o.cert_manager = true;
  o.apiserver_cidrs = {"10.0.0.0/28", "fd00::/64"};
  o.labels = {"release=kps"};
  const auto objects = webhook_manifests(o, std::nullopt);
  // Pod Security: the webhook's pod meets "restricted".
  const ordered_json& ns = find(objects, "Namespace");
  for (const char* mode : {"enforce", "audit", "warn"})
    EXPECT_EQ(ns["metadata"]["labels"][std::string("pod-security.kubernetes.io/") + mode], "restricted") << mode;
  const ordered_json& pdb = find(objects, "PodDisruptionBudget");
  EXPECT_EQ(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
  const ordered_json& policy = find(objects, "NetworkPolicy")["spec"];
  EXPECT_EQ(policy["policyTypes"], ordered_json::array({"Ingress", "Egress"}));
  EXPECT_EQ(policy["egress"], ordered_json::array());
  EXPECT_EQ(policy["ingress"][0]["ports"], ordered_json::parse(R"([{"protocol": "TCP", "port": 8443}])"));
  EXPECT_EQ(policy["ingress"][0]["from"],
            ordered_json::parse(R"([{"ipBlock": {"cidr": "10.0.0.0/28"}}, {"ipBlock": {"cidr": "fd00::/64"}}])"));
  const ordered_json& rules = find(objects, "PrometheusRule")["spec"]["groups"][0]["rules"];
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0]["alert"], "GpuRunWebhookFailingOpen");
  EXPECT_CONTAINS(rules[0]["expr"].get<std::string>(),
                  "apiserver_admission_webhook_fail_open_count{name=\"shm.gpu-run.io\", type=\"admit\"}");
  EXPECT_EQ(rules[1]["alert"], "GpuRunWebhookRejectingPods");
  EXPECT_CONTAINS(rules[1]["expr"].get<std::string>(), "apiserver_admission_webhook_rejection_count{");
  EXPECT_EQ(rules[0]["annotations"]["runbook_url"], kDefaultRunbookUrl + "#gpurunwebhookfailingopen");
  for (const ordered_json& object : objects)
    EXPECT_EQ(object["metadata"]["labels"]["release"], "kps") << object["kind"];
  o.no_monitoring = true;
  o.apiserver_cidrs.clear();
  const auto bare = webhook_manifests(o, std::nullopt);
  EXPECT_EQ(kinds(bare).back(), "MutatingWebhookConfiguration");
  EXPECT_FALSE(find(bare, "NetworkPolicy")["spec"]["ingress"][0].contains("from")) << "any source, the port only";
}

TEST(WebhookManifestsTest, AChangedConfigRollsTheDeployment) {
  const auto checksum = [](const std::string& config) {
    const auto objects = webhook_manifests(WebhookManifestOptions{}, std::nullopt, config);
    return find(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]["gpu-run.io/config-sha256"]
        .get<std::string>();
  };
  // sha256 of the default webhook.json and its newline, as the ConfigMap holds it (sha256sum).
  EXPECT_EQ(checksum(kDefaultWebhookConfig), "f583fef9ab817ddf857518101bf354c5bb934727f558bfb65fd2690bdc6a5dcf");
  const std::string ml = R"({"policy": "deny", "namespace_profiles": {"ml": "imagenet"}})";
  EXPECT_NE(checksum(ml), checksum(kDefaultWebhookConfig));
  const auto with_ml = webhook_manifests(WebhookManifestOptions{}, std::nullopt, ml);
  EXPECT_EQ(find(with_ml, "ConfigMap")["data"]["webhook.json"], ml + "\n");
  const Error e = expect_error([] { webhook_manifests(WebhookManifestOptions{}, std::nullopt, R"({"polcy": 1})"); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "unknown key");
}

TEST(WebhookManifestsTest, DeploymentIsHardened) {
  WebhookManifestOptions o;
  o.image = "registry.example/gpu-run-webhook:1";
  const auto objects = webhook_manifests(o, std::nullopt);
  const ordered_json& d = find(objects, "Deployment");
  EXPECT_EQ(d["metadata"]["namespace"], "gpu-run");
  EXPECT_EQ(d["spec"]["replicas"], 2);
  const ordered_json& pod = d["spec"]["template"]["spec"];
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  const ordered_json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/gpu-run-webhook:1");
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], ordered_json::array({"ALL"}));
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "320Mi");
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "50m");
  EXPECT_EQ(pod["volumes"][2]["configMap"]["name"], "gpu-run-profiles");
  EXPECT_EQ(c["volumeMounts"][2]["mountPath"], "/profiles");
  EXPECT_EQ(find(objects, "PodDisruptionBudget")["spec"]["minAvailable"], 1);
  EXPECT_EQ(find(objects, "Service")["spec"]["ports"][0]["port"], 443);
  // The image default is the version's tag.
  EXPECT_EQ(find(webhook_manifests(WebhookManifestOptions{}, std::nullopt),
                 "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"],
            std::string("gpu-run-webhook:") + GPU_RUN_VERSION);
}

TEST(WebhookManifestsTest, SelfSignedGivesTheSecretAndCaBundle) {
  const WebhookTlsPair tls{"CA PEM\n", "CERT PEM\n", "KEY PEM\n"};
  const auto objects = webhook_manifests(WebhookManifestOptions{}, tls);
  EXPECT_EQ(kinds(objects), (std::vector<std::string>{"Namespace", "ConfigMap", "Secret", "Deployment", "Service",
                                                      "PodDisruptionBudget", "NetworkPolicy",
                                                      "MutatingWebhookConfiguration", "PrometheusRule"}));
  const ordered_json& secret = find(objects, "Secret");
  EXPECT_EQ(secret["type"], "kubernetes.io/tls");
  EXPECT_EQ(secret["data"]["tls.crt"], "Q0VSVCBQRU0K");  // base64 of "CERT PEM\n"
  EXPECT_EQ(secret["data"]["tls.key"], "S0VZIFBFTQo=");
  const ordered_json& hooks = find(objects, "MutatingWebhookConfiguration");
  EXPECT_EQ(hooks["webhooks"][0]["clientConfig"]["caBundle"], "Q0EgUEVNCg==");
  EXPECT_FALSE(hooks["metadata"].contains("annotations"));
}

TEST(WebhookManifestsTest, RenderedAsOneYamlStream) {
  WebhookManifestOptions o;
  o.cert_manager = true;
  const std::string text = render_webhook_manifests(o, std::nullopt);
  EXPECT_EQ(text.rfind("# gpu-run-webhook in namespace gpu-run", 0), 0u);
  std::size_t documents = 0;
  for (std::size_t at = text.find("\n---\n"); at != std::string::npos; at = text.find("\n---\n", at + 1)) ++documents;
  EXPECT_EQ(documents, 12u);
  EXPECT_CONTAINS(text, "kubectl label namespace NS gpu-run.io/webhook=enabled");
}

TEST(WebhookManifestsTest, ImageFromAPrivateRegistry) {
  // The image as built by packaging/webhook/build-image, pushed to the registry the cluster pulls from.
  WebhookManifestOptions o;
  o.image = "registry.example.com:5000/ml/gpu-run-webhook:0.1.0";
  o.image_pull_secrets = {"regcred", "regcred-2"};
  const auto objects = webhook_manifests(o, std::nullopt);
  const ordered_json& pod = find(objects, "Deployment")["spec"]["template"]["spec"];
  EXPECT_EQ(pod["containers"][0]["image"], o.image);
  EXPECT_EQ(pod["imagePullSecrets"], ordered_json::parse(R"([{"name": "regcred"}, {"name": "regcred-2"}])"));
  EXPECT_FALSE(find(webhook_manifests(WebhookManifestOptions{}, std::nullopt), "Deployment")["spec"]["template"]["spec"]
                   .contains("imagePullSecrets"))
      << "a public image needs none";
  o.image_pull_secrets = {"Reg_Cred"};
  const Error e = expect_error([&] { webhook_manifests(o, std::nullopt); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--image-pull-secret 'Reg_Cred': expected the name of a Secret");
  EXPECT_CONTAINS(e.what(), "in the webhook's namespace");
}

TEST(WebhookManifestsTest, BadInputIsAUsageError) {
  WebhookManifestOptions o;
  o.namespace_name = "Bad_NS";
  Error e = expect_error([&] { webhook_manifests(o, std::nullopt); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "--namespace 'Bad_NS'");
  o.namespace_name = "ok";
  o.image = "two words";
  EXPECT_CONTAINS(expect_error([&] { webhook_manifests(o, std::nullopt); }).what(), "--image 'two words'");
  o.image.clear();
  o.apiserver_cidrs = {"10.0.0.0"};
  EXPECT_CONTAINS(expect_error([&] { webhook_manifests(o, std::nullopt); }).what(), "--apiserver-cidr '10.0.0.0'");
  for (const char* cidr : {"10.0.0.0/33", "10.0.0/8", "fd00::/129", "x/1", "10.0.0.0/"}) {
    o.apiserver_cidrs = {cidr};
    EXPECT_EQ(expect_error([&] { webhook_manifests(o, std::nullopt); }).exit_code(), kExitUsage) << cidr;
  }
  // Neither or both certificate set-ups.
  EXPECT_CONTAINS(expect_error([] { run_webhook_manifests(WebhookManifestOptions{}); }).what(),
                  "--cert-manager or --self-signed DIR");
}

TEST(WebhookManifestsTest, PlacedAsTheGuardIs) {
  WebhookManifestOptions o;
  const auto defaults = webhook_manifests(o, std::nullopt);
  const ordered_json& plain = find(defaults, "Deployment");
  EXPECT_EQ(plain["spec"]["replicas"], 2);
  EXPECT_FALSE(plain["spec"]["template"]["spec"].contains("tolerations"));
  EXPECT_FALSE(plain["spec"]["template"]["spec"].contains("priorityClassName"));
  EXPECT_EQ(plain["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"], "320Mi");
  o.tolerations = {"dedicated=infra:NoSchedule"};
  o.node_selectors = {"pool=system"};
  o.priority_class = "system-cluster-critical";
  o.replicas = "3";
  const auto objects = webhook_manifests(o, std::nullopt);
  const ordered_json& pod = find(objects, "Deployment")["spec"]["template"]["spec"];
  EXPECT_EQ(find(objects, "Deployment")["spec"]["replicas"], 3);
  EXPECT_EQ(
      pod["tolerations"],
      ordered_json::parse(R"([{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}])"));
  EXPECT_EQ(pod["nodeSelector"], ordered_json::parse(R"({"pool": "system"})"));
  EXPECT_EQ(pod["priorityClassName"], "system-cluster-critical");
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"--replicas '0'", "0"}, {"--replicas 'two'", "two"}, {"--priority-class 'Bad'", "Bad"}}) {
    WebhookManifestOptions bad;
    if (field.rfind("--replicas", 0) == 0)
      bad.replicas = value;
    else
      bad.priority_class = value;
    const Error e = expect_error([&] { webhook_manifests(bad, std::nullopt); });
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_CONTAINS(std::string(e.what()), field);
  }
}

TEST(WebhookManifestsTest, DnsNamesOfTheService) {
  EXPECT_EQ(webhook_dns_names("x"), (std::vector<std::string>{"gpu-run-webhook.x.svc", "gpu-run-webhook.x",
                                                              "gpu-run-webhook.x.svc.cluster.local"}));
}

}  // namespace
}  // namespace gpurun
