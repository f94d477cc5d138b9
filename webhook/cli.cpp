#include "webhook/cli.hpp"

#include <CLI/CLI.hpp>
#include <string>

#include "base/error.hpp"
#include "base/program.hpp"
#include "decision/contract.hpp"

namespace gpurun {

void add_webhook_options(CLI::App& app, WebhookOptions& o) {
  app.name("gpu-run-webhook");
  app.description(std::string("gpu-run-webhook: a mutating admission webhook (admission.k8s.io/v1) that gives pods "
                              "annotated ") +
                  request_key(RequestKey::kProfile).annotation + " a memory-backed /dev/shm of the planned size");
  app.set_version_flag("--version", std::string("gpu-run-webhook ") + GPU_RUN_VERSION);
  app.add_option("--listen", o.listen, "Address and port to serve HTTPS on (port 0: any free port)")
      ->type_name("ADDR:PORT")
      ->capture_default_str();
  app.add_option("--tls-cert", o.tls_cert, "PEM certificate (chain), reloaded when the file changes")
      ->type_name("FILE")
      ->required();
  app.add_option("--tls-key", o.tls_key, "PEM private key, reloaded when the file changes")
      ->type_name("FILE")
      ->required();
  app.add_option("--profile-dir", o.profile_dirs, "Look up profiles here first (repeatable; names only)")
      ->type_name("DIR");
  app.add_option("--config", o.config,
                 "Webhook config (JSON: policy, memory_fraction_max, profile_dirs, default_cpus, namespace_profiles)")
      ->type_name("FILE");
  app.add_option("--max-body", o.max_body, "Largest request body; larger ones get 413")
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("--io-timeout", o.io_timeout, "Seconds one read or write may wait")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout,
                 "Seconds a connection may spend on one request before it is closed")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 "Connections served at once, a thread each from its TLS handshake until it closes; more wait "
                 "for a free thread")
      ->type_name("N")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--tls-reload-interval", o.reload_interval, "Seconds between checks of the TLS files")
      ->type_name("SECONDS")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.footer(
      "POST /mutate answers AdmissionReviews for Pods; GET /healthz, /readyz and /metrics (Prometheus).\n"
      "Policy (config \"policy\"): raise (default) raises memory limits and requests by the shm size;\n"
      "deny refuses a pod whose plan does not fit; warn admits it unchanged with a warning.\n"
      "One log line per review on stderr; SIGTERM stops after the reviews in flight.");
}

std::optional<int> parse_webhook_args(int argc, char** argv, WebhookOptions& o) {
  CLI::App app;
  add_webhook_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    print_error("gpu-run-webhook", std::string(e.what()) + " (see gpu-run-webhook --help)");
    return static_cast<int>(kExitUsage);
  }
  return std::nullopt;
}

}  // namespace gpurun
