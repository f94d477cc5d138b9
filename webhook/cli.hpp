#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace gpurun {

// gpu-run-webhook's command line; the defaults are the ones --help and gpu-run-webhook(1) show.
struct WebhookOptions {
  std::string listen = "0.0.0.0:8443";
  std::string tls_cert;
  std::string tls_key;
  std::vector<std::string> profile_dirs;
  std::optional<std::string> config;
  std::string max_body = "3MiB";
  unsigned io_timeout = 10;
  unsigned request_timeout = 15;
  unsigned reload_interval = 2;
  unsigned threads = 4096;
};

// Requests served on one kept-alive connection before it is closed (nginx's keepalive_requests).
inline constexpr std::size_t kWebhookKeepAliveRequests = 1000;
// Seconds an idle kept-alive connection stays open.
inline constexpr int kWebhookKeepAliveSeconds = 5;

// Defines gpu-run-webhook's command line on `app` (description, options, footer), parsed into `o`:
// the one definition --help and the man page (man/, generated at build time) both read.
void add_webhook_options(CLI::App& app, WebhookOptions& o);

// Parses argv into `o`. Returns nullopt to go on serving, else the exit code (0 after --help or
// --version; a bad command line printed as one line, kExitUsage).
std::optional<int> parse_webhook_args(int argc, char** argv, WebhookOptions& o);

}  // namespace gpurun
