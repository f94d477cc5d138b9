#include "guard/metrics_server.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <sys/un.h>

#include <filesystem>

#include "base/error.hpp"
#include "base/program_path.hpp"

namespace gpurun {
namespace {

Error bad_address(const std::string& text, const std::string& why) {
  return usage_error("--metrics '" + text.substr(0, 120) + "': " + why +
                     "; expected 127.0.0.1:PORT, [::1]:PORT or unix:/PATH");
}

// The module next to the program: <prefix>/bin/gpu-run-ctl -> <prefix>/lib/gpu-run/ (the build
// tree has the same layout).
std::filesystem::path module_path() { return program_dir().parent_path() / "lib" / "gpu-run" / kMetricsModule; }

}  // namespace

MetricsAddress parse_metrics_address(const std::string& text, bool allow_public) {
  MetricsAddress a;
  if (text.rfind("unix:", 0) == 0) {
    a.unix_socket = true;
    a.loopback = true;
    a.path = text.substr(5);
    if (a.path.empty() || a.path[0] != '/') throw bad_address(text, "a unix socket needs an absolute path");
    if (a.path.size() >= sizeof(sockaddr_un{}.sun_path))
      throw bad_address(
          text, "the socket path is longer than " + std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes");
    return a;
  }
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw bad_address(text, "no port");
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  unsigned char buf[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, host.c_str(), buf) == 1) {
    a.loopback = buf[0] == 127;
  } else if (text.front() == '[' && ::inet_pton(AF_INET6, host.c_str(), buf) == 1) {
    in6_addr v6{};
    std::copy(buf, buf + sizeof v6, reinterpret_cast<unsigned char*>(&v6));
    a.loopback = IN6_IS_ADDR_LOOPBACK(&v6);
  } else if (::inet_pton(AF_INET6, host.c_str(), buf) == 1) {
    throw bad_address(text, "an IPv6 address goes in brackets: [" + host + "]:PORT");
  } else {
    throw bad_address(
        text, host.empty() ? "no address before the port" : "'" + host.substr(0, 80) + "' is not an IP address");
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535)
    throw bad_address(text, "the port must be 1 to 65535");
  a.host = host;
  a.port = std::stoi(port);
  if (!a.loopback && !allow_public)
    throw usage_error("--metrics '" + text.substr(0, 120) +
                      "' is not a loopback address: the metrics are plain, unauthenticated HTTP; add "
                      "--metrics-public to serve them there anyway");
  return a;
}

std::string metrics_address_text(const MetricsAddress& a) {
  if (a.unix_socket) return "unix:" + a.path;
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

std::unique_ptr<MetricsServer> serve_metrics(const MetricsAddress& address, MetricsRoutes routes) {
  const std::filesystem::path path = module_path();
  // Never closed: the server's code must stay mapped while it runs, and that is until exit.
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    const std::string why = std::filesystem::exists(path) ? std::string(": ") + ::dlerror() : ", which is missing";
    throw Error("--metrics needs " + path.string() + why +
                " (cpp-httplib's server, not in the gpu-run package: install the gpu-run-metrics package, or "
                "`cmake --install BUILD --component metrics` from a build)");
  }
  auto start = reinterpret_cast<MetricsServerStart>(::dlsym(module, kMetricsServerStart));
  if (!start) throw Error(path.string() + " has no " + kMetricsServerStart + ": a module of another gpu-run version?");
  std::string error;
  std::unique_ptr<MetricsServer> server(start(address, std::move(routes), error));
  if (!server) throw Error("--metrics " + metrics_address_text(address) + ": " + error);
  return server;
}

}  // namespace gpurun
