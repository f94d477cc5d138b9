#pragma once

// The certificate set-up of `gpu-run-ctl k8s webhook-manifests --self-signed DIR`: a CA and a
// serving certificate for the webhook's Service, made with OpenSSL's C API.

#include <filesystem>
#include <string>
#include <vector>

namespace gpurun {

// PEM texts: the CA's certificate (the webhook configuration's caBundle), the serving
// certificate it signed and the serving key (the Secret's tls.crt and tls.key).
struct WebhookTlsPair {
  std::string ca_cert;
  std::string cert;
  std::string key;
};

// Days a made CA and serving certificate are valid.
inline constexpr long kWebhookCaDays = 3650;
inline constexpr long kWebhookCertDays = 825;

// A new CA ("CN=<ca_name>", EC P-256, kWebhookCaDays; its key is not kept) and a serving
// certificate it signs for `dns_names` (the first also the CN; serverAuth; kWebhookCertDays).
WebhookTlsPair make_webhook_tls_pair(const std::string& ca_name, const std::vector<std::string>& dns_names);

// The pair in `dir` (ca.crt, tls.crt, tls.key): read when all three are there and tls.crt is
// signed by ca.crt for every one of `dns_names`, made and written (tls.key mode 0600) when
// none is. Throws Error (exit 2) on a partial or mismatched set, saying what to remove.
WebhookTlsPair webhook_tls_pair_in(const std::filesystem::path& dir, const std::string& ca_name,
                                   const std::vector<std::string>& dns_names);

// Checks that `pair.cert` is signed by `pair.ca_cert`, matches `pair.key` and names every one of
// `dns_names`; "" when so, else what is wrong.
std::string check_webhook_tls_pair(const WebhookTlsPair& pair, const std::vector<std::string>& dns_names);

}  // namespace gpurun
