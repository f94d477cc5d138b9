// gpu-run-metrics-http.so: gpu-run-ctl guard --metrics's HTTP server (cpp-httplib), loaded at
// run time by serve_metrics() (metrics_server.hpp), so that gpu-run-ctl links no HTTP library.

#include <errno.h>
#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "guard/metrics_server.hpp"
#include "serve/httplib_task_queue.hpp"
#include "serve/prometheus.hpp"

namespace gpurun {
namespace {

class HttpMetricsServer : public MetricsServer {
 public:
  ~HttpMetricsServer() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
    if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
  }

  // Empty when it listens; else why not.
  std::string start(const MetricsAddress& a, MetricsRoutes routes) {
    server_.new_task_queue = [] { return new ThreadPerConnection(kMetricsMaxConnections); };
    server_.set_read_timeout(kMetricsTimeoutSeconds, 0);
    server_.set_write_timeout(kMetricsTimeoutSeconds, 0);
    server_.set_keep_alive_timeout(kMetricsKeepAliveSeconds);
    // A response goes out in two writes (headers, body): without TCP_NODELAY the second waits for
    // the client's delayed ACK on a kept-alive connection, as the webhook's did (bench/WEBHOOK.md).
    server_.set_tcp_nodelay(true);
    server_.Get("/metrics", [render = std::move(routes.metrics)](const httplib::Request&, httplib::Response& res) {
      res.set_content(render(), kPrometheusContentType);
    });
    const auto serve_answer = [this](const char* path, std::function<HttpAnswer()> answer) {
      server_.Get(path, [answer = std::move(answer)](const httplib::Request&, httplib::Response& res) {
        const HttpAnswer out = answer();
        res.status = out.status;
        res.set_content(out.body, "text/plain; charset=utf-8");
      });
    };
    serve_answer("/healthz", std::move(routes.healthz));
    serve_answer("/readyz", std::move(routes.readyz));
    if (a.unix_socket) {
      if (std::string why = clear_stale_socket(a.path); !why.empty()) return why;
      server_.set_address_family(AF_UNIX);
    }
    errno = 0;
    if (!server_.bind_to_port(a.unix_socket ? a.path : a.host, a.unix_socket ? 80 : a.port))
      return std::string("cannot listen there") + (errno ? std::string(": ") + std::strerror(errno) : "") +
             (a.unix_socket ? "" : " (the port in use, or not an address of this host?)");
    if (a.unix_socket) unix_path_ = a.path;
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    return "";
  }

 private:
  // A socket file nobody listens on (a guard that was killed) is removed; anything else stays.
  static std::string clear_stale_socket(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? "" : path + ": " + std::strerror(errno);
    if (!S_ISSOCK(st.st_mode)) return path + " exists and is not a socket: remove it or choose another path";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::string("socket: ") + std::strerror(errno);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::strncpy(sun.sun_path, path.c_str(), sizeof sun.sun_path - 1);
    const bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0;
    ::close(fd);
    if (live) return path + " is in use: another process listens on it";
    if (::unlink(path.c_str()) != 0) return "remove the stale socket " + path + ": " + std::strerror(errno);
    return "";
  }

  httplib::Server server_;
  std::thread thread_;
  std::string unix_path_;
};

}  // namespace
}  // namespace gpurun

extern "C" __attribute__((visibility("default"))) gpurun::MetricsServer* gpu_run_metrics_http_start_v2(
    const gpurun::MetricsAddress& address, gpurun::MetricsRoutes routes, std::string& error) {
  auto server = std::make_unique<gpurun::HttpMetricsServer>();
  error = server->start(address, std::move(routes));
  return error.empty() ? server.release() : nullptr;
}
