#pragma once

// gpu-run-webhook's TLS pieces over OpenSSL: the serving certificate, reloaded when its files
// change (each new handshake picks up the current pair: no listener restart), and a deadline
// per request on every connection (cpp-httplib 0.11 has timeouts per read and write only, so
// a client sending a byte a second would hold a thread forever).

#include <openssl/ssl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace gpurun {

// The certificate chain and key served, loaded from PEM files.
class TlsCredentials {
 public:
  // Loads both files; throws Error when they cannot be read or do not match.
  TlsCredentials(std::filesystem::path cert_file, std::filesystem::path key_file);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  // Reloads when either file changed (mtime, size or inode). Returns "" when nothing changed,
  // "reloaded", or why the new files were refused (the old pair stays in use).
  std::string reload_if_changed();

  // Sets up `ctx` (TLS 1.2 or later, the current pair for every handshake). For
  // httplib::SSLServer's setup callback.
  bool setup(SSL_CTX& ctx);

 private:
  struct Pair;
  static int select_certificate(SSL* ssl, void* self);
  std::string stamp() const;
  std::shared_ptr<Pair> load() const;

  std::filesystem::path cert_file_, key_file_;
  std::mutex mutex_;
  std::shared_ptr<Pair> current_;
  std::string stamp_;
};

// Closes connections (shutdown(2) of the socket) that spend more than `limit` on one request:
// from the handshake, or from the last request the server handled on a kept-alive connection
// (`handled`; not from any write, so a client cannot extend its time with TLS KeyUpdates).
// Each instance watches the connections of the contexts it is attached to, and only those.
class ConnectionDeadlines {
 public:
  explicit ConnectionDeadlines(std::chrono::milliseconds limit);
  ~ConnectionDeadlines();  // stops the watchdog thread
  ConnectionDeadlines(const ConnectionDeadlines&) = delete;
  ConnectionDeadlines& operator=(const ConnectionDeadlines&) = delete;

  // Installs the callbacks on `ctx`, which must start no connection once this is destroyed
  // (the SSLs it has may be freed later).
  void attach(SSL_CTX& ctx);

  // A request from this peer was read and handled: its connection's clock starts again.
  void handled(const std::string& peer_addr, int peer_port);

  // Connections closed for their deadline so far.
  std::uint64_t expired() const;

 private:
  // The connections watched. Each connection's record holds it weakly: an SSL may be freed
  // after this is destroyed.
  struct Table;
  // An SSL's ex_data: its owner's table and its entry there.
  struct Connection;
  // The SSL ex_data index of every instance's records (one per process; its free callback
  // finds the owner in the record).
  static int connection_index();
  static void on_message(int write_p, int version, int content_type, const void* buf, size_t len, SSL* ssl, void* arg);
  static void on_free(void* parent, void* ptr, CRYPTO_EX_DATA* ad, int idx, long argl, void* argp);
  void watch();

  std::chrono::milliseconds limit_;
  std::shared_ptr<Table> table_;
  std::condition_variable wake_;
  bool stop_ = false;  // with table_'s mutex held
  std::thread thread_;
};

}  // namespace gpurun
