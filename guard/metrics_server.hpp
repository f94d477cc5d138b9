#pragma once

// gpu-run-ctl guard --metrics: where the Prometheus endpoint listens, and the server itself.
// The server is cpp-httplib, in a module loaded at run time (gpu-run-metrics-http.so): the
// gpu-run package's gpu-run-ctl links no HTTP or TLS library (docs/ARCHITECTURE.md, "Modules",
// the ctl/ row).

#include <functional>
#include <memory>
#include <string>

namespace gpurun {

// Where --metrics listens: a TCP address (an IPv4 or IPv6 literal and a port) or a unix socket.
struct MetricsAddress {
  bool unix_socket = false;
  std::string host;  // the literal, without brackets (TCP)
  int port = 0;      // TCP
  std::string path;  // absolute (unix socket)
  bool loopback = false;
};

// Parses 127.0.0.1:PORT, [::1]:PORT, localhost:PORT (127.0.0.1), any IP literal with a port, or
// unix:/PATH. A non-loopback address needs `allow_public` (--metrics-public). Throws Error
// (exit 2) naming --metrics and what to give.
MetricsAddress parse_metrics_address(const std::string& text, bool allow_public);

// The address as a person writes it (127.0.0.1:9400, [::1]:9400, unix:/run/x.sock).
std::string metrics_address_text(const MetricsAddress& address);

// An answer with its status (a probe's: 200 or 503), as text/plain.
struct HttpAnswer {
  int status = 200;
  std::string body;
};

// What the server answers, each called on the server's threads: GET /metrics the exposition,
// GET /healthz and /readyz the guard's liveness and readiness (guard_health.hpp).
struct MetricsRoutes {
  std::function<std::string()> metrics;
  std::function<HttpAnswer()> healthz;
  std::function<HttpAnswer()> readyz;
};

// A running server. Stops and joins its threads (and removes its unix socket) when destroyed.
class MetricsServer {
 public:
  virtual ~MetricsServer() = default;
};

// Connections the server serves at once, a thread each (ThreadPerConnection: a socket that sends
// nothing holds only its own); more wait for a free thread. gpu-run-ctl(1) states it (man/).
inline constexpr int kMetricsMaxConnections = 64;
// How long one read or write of a connection may wait.
inline constexpr int kMetricsTimeoutSeconds = 2;
// A kept-alive connection is closed once it has been idle this long (cpp-httplib polls it every
// 10 ms): Prometheus scrapes every 15 s or so and reconnects, so a longer keep-alive serves no
// scraper and only held the guard's exit for 2 s after SIGTERM (the server stops when its
// connections end), leaving containers unguarded while a restarted guard waited to start.
inline constexpr int kMetricsKeepAliveSeconds = 0;

// Binds `address` and serves `routes` in threads of its own: kMetricsMaxConnections connections at
// once, each with read and write timeouts of kMetricsTimeoutSeconds, so no client holds a thread
// longer and none can stall the caller. A stale unix socket (nobody listening) is replaced; a live one or another
// file is refused. Throws Error: the module missing (how to install it), or the bind failed.
std::unique_ptr<MetricsServer> serve_metrics(const MetricsAddress& address, MetricsRoutes routes);

// The module's entry point (C linkage, looked up by name): nullptr and `error` set on failure.
// Its name changes with its signature, so that a module of another version is refused by name
// rather than called with arguments it does not take.
using MetricsServerStart = MetricsServer* (*)(const MetricsAddress& address, MetricsRoutes routes, std::string& error);
inline constexpr const char* kMetricsServerStart = "gpu_run_metrics_http_start_v2";
inline constexpr const char* kMetricsModule = "gpu-run-metrics-http.so";

}  // namespace gpurun
