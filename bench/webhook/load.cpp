// bench/webhook's load generator: CONNECTIONS threads, each with one kept-alive TLS connection
// (cpp-httplib's SSLClient, the server's certificate verified), POST REVIEWS AdmissionReviews
// to /mutate between them, and print one JSON line: errors, wall time, throughput, latency
// percentiles. Built by bench/webhook/run; not part of gpu-run.
//   load HOST PORT CA_FILE BODY_FILE REVIEWS CONNECTIONS
// CPPHTTPLIB_OPENSSL_SUPPORT comes from pkg-config cpp-httplib (Debian builds it with OpenSSL).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: load HOST PORT CA_FILE BODY_FILE REVIEWS CONNECTIONS\n");
    return 2;
  }
  const std::string host = argv[1], ca = argv[3];
  const int port = std::stoi(argv[2]), total = std::stoi(argv[5]), connections = std::stoi(argv[6]);
  std::ifstream in(argv[4]);
  std::stringstream body;
  body << in.rdbuf();
  const std::string review = body.str();

  std::atomic<int> next{0}, errors{0};
  std::mutex m;
  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(total));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < connections; ++t) {
    threads.emplace_back([&] {
      httplib::SSLClient client(host, port);
      client.set_ca_cert_path(ca.c_str());
      client.enable_server_certificate_verification(true);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);  // as Go's net/http, the API server's client, does by default
      client.set_read_timeout(30, 0);
      std::vector<double> mine;
      while (next.fetch_add(1) < total) {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = client.Post("/mutate", review, "application/json");
        const auto t1 = std::chrono::steady_clock::now();
        if (!r || r->status != 200 || r->body.find("\"allowed\":true") == std::string::npos) ++errors;
        mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::lock_guard<std::mutex> lock(m);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies.empty()
               ? 0.0
               : latencies[std::min(latencies.size() - 1, static_cast<std::size_t>(p * latencies.size()))];
  };
  std::printf(
      "{\"reviews\":%zu,\"connections\":%d,\"errors\":%d,\"wall_s\":%.3f,\"per_s\":%.1f,\"p50_ms\":%.3f,"
      "\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f}\n",
      latencies.size(), connections, errors.load(), wall, latencies.size() / wall, pct(0.50), pct(0.90), pct(0.99),
      latencies.empty() ? 0.0 : latencies.back());
  return errors.load() == 0 ? 0 : 1;
}
