// gpu-run-webhook: a mutating admission webhook that gives pods a /dev/shm of the planned size.
// The HTTPS server only; the review is admission.cpp (pure), the TLS pieces tls.cpp.

#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"
#include "base/program.hpp"
#include "base/units.hpp"
#include "decision/config.hpp"
#include "decision/contract.hpp"
#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"
#include "serve/httplib_task_queue.hpp"
#include "serve/profile_cache.hpp"
#include "serve/prometheus.hpp"
#include "webhook/admission.hpp"
#include "webhook/cli.hpp"
#include "webhook/log_writer.hpp"
#include "webhook/metrics.hpp"
#include "webhook/tls.hpp"

namespace gpurun {
namespace {

constexpr const char* kProgram = "gpu-run-webhook";
// How often a review checks the profile directories for a change (stat calls, bench/WEBHOOK.md).
constexpr std::chrono::milliseconds kProfileCheckInterval{1000};

// Every connection is a descriptor: raise the soft RLIMIT_NOFILE to the hard one (as Go's runtime
// does), so the cap on connections is --threads and not the soft limit's usual 1024. Returns the
// descriptors now allowed.
rlim_t raise_fd_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return 0;
  if (l.rlim_cur < l.rlim_max) {
    rlimit raised{l.rlim_max, l.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return l.rlim_max;
  }
  return l.rlim_cur;
}

std::pair<std::string, int> split_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size())
    throw usage_error("--listen '" + listen + "': expected ADDR:PORT, e.g. 0.0.0.0:8443 or [::]:8443");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  const auto port = parse_count(listen.substr(colon + 1), "--listen port", 65535);
  return {host, static_cast<int>(port)};
}

int serve(const WebhookOptions& o) {
  WebhookConfig config;
  if (o.config) config = parse_webhook_config(read_small_file(*o.config, 1 << 20, "--config"), *o.config);
  Config dirs_config;
  dirs_config.profile_dirs = config.profile_dirs;
  std::vector<fs::path> cli_dirs(o.profile_dirs.begin(), o.profile_dirs.end());
  // Loaded once and reused; a changed profile directory (an updated ConfigMap) is seen within
  // kProfileCheckInterval.
  ProfileCache profiles(profile_search_path(cli_dirs, dirs_config.profile_dirs, /*include_user=*/false),
                        kProfileCheckInterval);
  const std::uint64_t max_body = parse_size(o.max_body, "--max-body");
  const auto [host, port] = split_listen(o.listen);

  // SIGTERM and SIGINT are taken by sigtimedwait below, in every thread started after this.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Log lines go to stderr from the writer's thread (started after the mask, so it takes no
  // signal); it writes what is queued when serve returns.
  const Logger log(std::make_unique<LogWriter>(STDERR_FILENO), LogLevel::kDebug, kProgram);
  auto log_line = [&log](LogLevel level, const std::string& fields) { log.log(level, fields); };

  const rlim_t fds = raise_fd_limit();
  TlsCredentials credentials(o.tls_cert, o.tls_key);
  ConnectionDeadlines deadlines(std::chrono::seconds(o.request_timeout));
  httplib::SSLServer server([&](SSL_CTX& ctx) {
    deadlines.attach(ctx);
    // An idle kept-alive connection gives back its 34 KiB of TLS record buffers until its next
    // request (thousands of them open otherwise cost 100+ MiB).
    SSL_CTX_set_mode(&ctx, SSL_MODE_RELEASE_BUFFERS);
    return credentials.setup(ctx);
  });
  if (!server.is_valid()) throw Error("cannot set up TLS");
  server.set_payload_max_length(max_body);
  server.set_read_timeout(o.io_timeout, 0);
  server.set_write_timeout(o.io_timeout, 0);
  server.set_keep_alive_timeout(kWebhookKeepAliveSeconds);
  // cpp-httplib closes a kept-alive connection after 5 requests by default: every fifth review
  // paid a new TCP and TLS handshake (bench/webhook: 2,043 connections for 10,000 reviews, most
  // of the server's CPU in RSA signatures, and the one-connection p99 of 3.9 ms).
  server.set_keep_alive_max_count(kWebhookKeepAliveRequests);
  // A response goes out in two writes (headers, body): without TCP_NODELAY the second waits for the
  // client's delayed ACK, 40 ms or more a review (bench/webhook: p50 87 ms on one connection).
  server.set_tcp_nodelay(true);
  // cpp-httplib serves a connection, from its TLS handshake to its last kept-alive request, on
  // one task-queue thread. A fixed pool let 64 sockets that sent nothing stall every review for
  // --io-timeout; each connection has its own thread instead (bench/WEBHOOK.md, "hostile").
  const unsigned threads = o.threads;
  server.new_task_queue = [threads] { return new ThreadPerConnection(threads); };

  WebhookMetrics metrics;
  std::atomic<bool> ready{false};
  // Every handled request restarts its connection's deadline (keep-alive: the next request
  // gets the whole --request-timeout).
  server.set_post_routing_handler(
      [&](const httplib::Request& req, httplib::Response&) { deadlines.handled(req.remote_addr, req.remote_port); });
  server.Post("/mutate", [&](const httplib::Request& req, httplib::Response& res) {
    const auto start = std::chrono::steady_clock::now();
    const ReviewResult r = review_admission(req.body, config, *profiles.current());
    res.set_content(r.review.dump(), "application/json");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics.record(r.outcome, seconds);
    const LogLevel level = r.outcome == ReviewOutcome::kError ? LogLevel::kError
                           : (r.outcome == ReviewOutcome::kDenied || r.outcome == ReviewOutcome::kWarned)
                               ? LogLevel::kWarn
                               : LogLevel::kInfo;
    char took[32];
    std::snprintf(took, sizeof took, "%.6f", seconds);
    log_line(level, "event=review " + r.fields + " seconds=" + took);
  });
  server.Get("/healthz",
             [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  server.Get("/readyz", [&](const httplib::Request&, httplib::Response& res) {
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ok\n" : "not ready\n", "text/plain");
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), kPrometheusContentType);
  });

  // Debian's cpp-httplib is built with a listen backlog of 5: when the API server opens its
  // connections at once, the rest overflow the accept queue and their SYNs are retried after 1 s
  // and 3 s (bench/webhook: ListenOverflows, a max latency of 2 s). Listening again on the bound
  // socket raises the backlog (Linux keeps the socket and its queue).
  int listener = -1;
  server.set_socket_options([&listener](socket_t sock) {
    httplib::default_socket_options(sock);
    listener = sock;
  });
  int bound = port;
  if (port == 0)
    bound = server.bind_to_any_port(host);
  else if (!server.bind_to_port(host, port))
    bound = -1;
  if (bound <= 0) throw Error("cannot listen on " + o.listen);
  if (::listen(listener, SOMAXCONN) != 0) throw Error("listen on " + o.listen, errno);

  // Signals and certificate reloads, in one thread: SIGTERM stops the server (in-flight
  // reviews finish), the TLS files are checked every --tls-reload-interval seconds.
  std::atomic<bool> stopping{false};
  std::atomic<bool> signalled{false};
  std::thread control([&] {
    while (!stopping) {
      const timespec wait{static_cast<time_t>(o.reload_interval), 0};
      const int sig = sigtimedwait(&signals, nullptr, &wait);
      if (sig == SIGTERM || sig == SIGINT) {
        log_line(LogLevel::kInfo, std::string("event=shutdown signal=") + (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
        ready = false;
        signalled = true;
        server.stop();
        return;
      }
      const std::string reload = credentials.reload_if_changed();
      if (reload == "reloaded")
        log_line(LogLevel::kInfo, "event=tls-reload cert=" + log_quote(o.tls_cert));
      else if (!reload.empty())
        log_line(LogLevel::kWarn, "event=tls-reload-failed error=" + log_quote(reload) + " keeping=previous");
    }
  });
  // A namespace's default that does not load now is said once at start (each review of that
  // namespace then warns); profiles may still arrive with the ConfigMap, so it does not stop the server.
  for (const auto& [ns, profile] : config.namespace_profiles) {
    try {
      profiles.current()->load(profile, /*allow_path=*/false);
    } catch (const Error& e) {
      log_line(LogLevel::kWarn, "event=namespace-profile-missing namespace=" + log_quote(ns) +
                                    " profile=" + log_quote(profile) + " error=" + log_quote(e.what()));
    }
  }
  log_line(LogLevel::kInfo, "event=listening address=" + log_quote(host) + " port=" + std::to_string(bound) +
                                " profile_dirs=" + std::to_string(profiles.dirs().size()) +
                                " max_connections=" + std::to_string(o.threads) + " fd_limit=" + std::to_string(fds));
  if (fds < static_cast<rlim_t>(o.threads) + 64)
    log_line(LogLevel::kWarn, "event=fd-limit fd_limit=" + std::to_string(fds) +
                                  " max_connections=" + std::to_string(o.threads) +
                                  " hint=" + log_quote("raise the container's nofile limit, or lower --threads"));
  ready = true;
  const bool ok = server.listen_after_bind();
  stopping = true;
  if (!signalled) pthread_kill(control.native_handle(), SIGTERM);  // the listener failed: wake the thread
  control.join();
  log_line(LogLevel::kInfo, "event=stopped expired_connections=" + std::to_string(deadlines.expired()));
  return ok ? static_cast<int>(kExitOk) : static_cast<int>(kExitFailure);
}

}  // namespace
}  // namespace gpurun

int main(int argc, char** argv) {
  gpurun::WebhookOptions o;
  return gpurun::run_program("gpu-run-webhook", [&] {
    if (const std::optional<int> code = gpurun::parse_webhook_args(argc, argv, o)) return *code;
    return gpurun::serve(o);
  });
}
