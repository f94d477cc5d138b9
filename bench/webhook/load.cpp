// bench/webhook's load generator: CONNECTIONS threads, each with one kept-alive TLS connection
// (cpp-httplib's SSLClient, the server's certificate verified), POST REVIEWS AdmissionReviews
// to /mutate between them, and print one JSON line: errors, wall time, throughput, latency
// percentiles. Built by bench/webhook/run; not part of gpu-run.
//   load HOST PORT CA_FILE BODY_FILE REVIEWS CONNECTIONS [RATE [SERVER_PID]]
//
// Every connection is opened first (TCP and TLS handshake, one GET /healthz: "setup", timed on
// its own) and the reviews start when all are open, so no review's latency holds a handshake
// (but one sent after the server ended a kept-alive connection with "Connection: close", after
// its 1000 requests: "reconnects" counts those; a connection idle for the server's 5 s
// keep-alive timeout would reconnect uncounted, which the rates here never leave it).
// Without RATE (closed loop) each thread sends its next review when the last one is answered;
// a review's latency is from its send to its answer. With RATE (open loop, reviews/s over all
// connections) the reviews are due at Poisson arrival times (seeded, so every run offers the
// same schedule); the next free connection sends the next review when it is due, and its latency
// is from when it was due to its answer, so time spent waiting for a free connection counts
// (coordinated omission, as wrk2 corrects it). "late_p99_ms" is how late sends started.
// RATE 0 is the closed loop. With SERVER_PID, "server_cpu_us" is that process's CPU (user and
// system, from /proc) a review over the same phase, so the setup's handshakes are not in it; the
// load generator's own is "client_cpu_us".
// CPPHTTPLIB_OPENSSL_SUPPORT comes from pkg-config cpp-httplib (Debian builds it with OpenSSL).
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU seconds of process `pid` (utime + stime of /proc/PID/stat), or 0 without one.
double process_cpu_seconds(const std::string& pid) {
  if (pid.empty()) return 0;
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The p-th percentile (0..1) of sorted values (nearest rank below).
double pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7 || argc > 9) {
    std::fprintf(stderr, "usage: load HOST PORT CA_FILE BODY_FILE REVIEWS CONNECTIONS [RATE [SERVER_PID]]\n");
    return 2;
  }
  const std::string host = argv[1], ca = argv[3];
  const int port = std::stoi(argv[2]), total = std::stoi(argv[5]), connections = std::stoi(argv[6]);
  const double rate = argc >= 8 ? std::stod(argv[7]) : 0.0;
  const std::string server_pid = argc == 9 ? argv[8] : "";
  std::ifstream in(argv[4]);
  std::stringstream body;
  body << in.rdbuf();
  const std::string review = body.str();

  // Open loop: when each review is due, from the start of the measured phase.
  std::vector<Clock::duration> due(static_cast<std::size_t>(total));
  if (rate > 0) {
    std::mt19937_64 random(1);
    std::exponential_distribution<double> gap(rate);
    double at = 0;
    for (auto& d : due) {
      d = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
      at += gap(random);
    }
  }

  std::atomic<int> next{0}, errors{0}, setup_errors{0}, reconnects{0};
  std::mutex m;
  std::vector<double> latencies, late, setup;
  latencies.reserve(static_cast<std::size_t>(total));
  late.reserve(static_cast<std::size_t>(total));
  std::latch opened(connections);
  std::atomic<Clock::rep> start_at{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < connections; ++t) {
    threads.emplace_back([&] {
      auto client = std::make_unique<httplib::SSLClient>(host, port);
      client->set_ca_cert_path(ca.c_str());
      client->enable_server_certificate_verification(true);
      client->set_keep_alive(true);
      client->set_tcp_nodelay(true);  // as Go's net/http, the API server's client, does by default
      client->set_read_timeout(30, 0);
      const auto s0 = Clock::now();
      auto hello = client->Get("/healthz");
      const double setup_ms = ms(Clock::now() - s0);
      if (!hello || hello->status != 200) ++setup_errors;
      opened.arrive_and_wait();
      // The first thread past the latch sets the start.
      Clock::rep expected = 0;
      start_at.compare_exchange_strong(expected, Clock::now().time_since_epoch().count());
      const Clock::time_point start{Clock::duration(start_at.load())};
      std::vector<double> mine, mine_late;
      for (int i; (i = next.fetch_add(1)) < total;) {
        Clock::time_point from = Clock::now();
        if (rate > 0) {
          const auto when = start + due[static_cast<std::size_t>(i)];
          std::this_thread::sleep_until(when);
          mine_late.push_back(ms(Clock::now() - when));
          from = when;
        }
        if (!client->is_socket_open()) ++reconnects;
        auto r = client->Post("/mutate", review, "application/json");
        const auto done = Clock::now();
        if (!r || r->status != 200 || r->body.find("\"allowed\":true") == std::string::npos) ++errors;
        mine.push_back(ms(done - from));
      }
      std::lock_guard<std::mutex> lock(m);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      late.insert(late.end(), mine_late.begin(), mine_late.end());
      setup.push_back(setup_ms);
    });
  }
  // The measured phase: from the start (all connections open) to the last answer.
  while (start_at.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  const double cpu0 = cpu_seconds(), server0 = process_cpu_seconds(server_pid);
  for (auto& t : threads) t.join();
  const double cpu = cpu_seconds() - cpu0, server = process_cpu_seconds(server_pid) - server0;
  const Clock::time_point start{Clock::duration(start_at.load())};
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  std::sort(late.begin(), late.end());
  std::sort(setup.begin(), setup.end());
  const double n = static_cast<double>(latencies.size());
  std::printf(
      "{\"mode\":\"%s\",\"rate\":%.0f,\"reviews\":%zu,\"connections\":%d,\"errors\":%d,\"setup_errors\":%d,"
      "\"reconnects\":%d,\"wall_s\":%.3f,\"per_s\":%.1f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,"
      "\"max_ms\":%.3f,\"late_p99_ms\":%.3f,\"setup_p50_ms\":%.3f,\"setup_max_ms\":%.3f,\"client_cpu_us\":%.0f,"
      "\"server_cpu_us\":%.0f}\n",
      rate > 0 ? "open" : "closed", rate, latencies.size(), connections, errors.load(), setup_errors.load(),
      reconnects.load(), wall, n / wall, pct(latencies, 0.50), pct(latencies, 0.90), pct(latencies, 0.99),
      latencies.empty() ? 0.0 : latencies.back(), pct(late, 0.99), pct(setup, 0.50), setup.empty() ? 0.0 : setup.back(),
      n > 0 ? cpu / n * 1e6 : 0.0, n > 0 ? server / n * 1e6 : 0.0);
  return errors.load() == 0 && setup_errors.load() == 0 ? 0 : 1;
}
