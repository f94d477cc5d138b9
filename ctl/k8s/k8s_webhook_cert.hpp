#pragma once

// The certificate set-up of `gpu-run-ctl k8s webhook-manifests --self-signed DIR`: a CA and a
// serving certificate for the webhook's Service, made with OpenSSL's C API.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"

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
// A pair whose CA or serving certificate ends within this many days is made anew (rotation:
// rerun the command and apply its output).
inline constexpr long kWebhookRenewDays = 30;

// A new CA ("CN=<ca_name>", EC P-256, kWebhookCaDays; its key is not kept) and a serving
// certificate it signs for `dns_names` (the first also the CN; serverAuth; kWebhookCertDays).
WebhookTlsPair make_webhook_tls_pair(const std::string& ca_name, const std::vector<std::string>& dns_names,
                                     long cert_days = kWebhookCertDays);

// Whether the CA or the serving certificate of `pair` ends within `days` days from now (or has
// ended). A certificate that cannot be read counts as ending.
bool webhook_tls_pair_ends_within(const WebhookTlsPair& pair, long days);

// The pair in `dir` (ca.crt, tls.crt, tls.key): read when all three are there and tls.crt is
// signed by ca.crt for every one of `dns_names`, made and written (tls.key mode 0600) when
// none is, and made anew, replacing the three files, when it ends within kWebhookRenewDays
// (`*renewed` then true: the CA's key is not kept, so the caBundle changes too). Throws Error
// (exit 2) on a partial or mismatched set, saying what to remove.
WebhookTlsPair webhook_tls_pair_in(const std::filesystem::path& dir, const std::string& ca_name,
                                   const std::vector<std::string>& dns_names, bool* renewed = nullptr);

// Checks that `pair.cert` is signed by `pair.ca_cert`, matches `pair.key` and names every one of
// `dns_names`; nullopt when so, else what is wrong (a usage error: the files are the caller's).
std::optional<Error> check_webhook_tls_pair(const WebhookTlsPair& pair, const std::vector<std::string>& dns_names);

}  // namespace gpurun
