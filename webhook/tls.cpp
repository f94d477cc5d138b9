#include "webhook/tls.hpp"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>

#include "base/error.hpp"
#include "serve/openssl_util.hpp"

namespace gpurun {
namespace {

BioPtr open_pem(const std::filesystem::path& file) {
  BioPtr bio(BIO_new_file(file.c_str(), "r"));
  if (!bio) throw Error("cannot read " + file.string() + ": " + openssl_error());
  return bio;
}

}  // namespace

struct TlsCredentials::Pair {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = sk_X509_new_null();
  EVP_PKEY* key = nullptr;
  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

TlsCredentials::TlsCredentials(std::filesystem::path cert_file, std::filesystem::path key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {
  stamp_ = stamp();
  current_ = load();
}

TlsCredentials::~TlsCredentials() = default;

std::string TlsCredentials::stamp() const {
  std::string out;
  for (const auto* file : {&cert_file_, &key_file_}) {
    struct stat st {};
    if (stat(file->c_str(), &st) != 0) {
      out += "missing;";
      continue;
    }
    out += std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) +
           "." + std::to_string(st.st_mtim.tv_nsec) + ";";
  }
  return out;
}

std::shared_ptr<TlsCredentials::Pair> TlsCredentials::load() const {
  auto pair = std::make_shared<Pair>();
  {
    BioPtr bio = open_pem(cert_file_);
    pair->leaf = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (!pair->leaf) throw Error(cert_file_.string() + ": no PEM certificate: " + openssl_error());
    while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) sk_X509_push(pair->chain, extra);
    ERR_clear_error();  // the end of the file
  }
  {
    BioPtr bio = open_pem(key_file_);
    pair->key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    if (!pair->key) throw Error(key_file_.string() + ": no PEM private key: " + openssl_error());
  }
  if (X509_check_private_key(pair->leaf, pair->key) != 1)
    throw Error(key_file_.string() + ": the key does not match the certificate " + cert_file_.string());
  return pair;
}

std::string TlsCredentials::reload_if_changed() {
  const std::string now = stamp();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (now == stamp_) return "";
  }
  try {
    std::shared_ptr<Pair> pair = load();
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = std::move(pair);
    stamp_ = now;
    return "reloaded";
  } catch (const Error& e) {
    // A half-written pair (certificate renewed, key not yet): try again at the next change.
    std::lock_guard<std::mutex> lock(mutex_);
    stamp_ = now;
    return e.what();
  }
}

int TlsCredentials::select_certificate(SSL* ssl, void* self) {
  auto* creds = static_cast<TlsCredentials*>(self);
  std::shared_ptr<Pair> pair;
  {
    std::lock_guard<std::mutex> lock(creds->mutex_);
    pair = creds->current_;
  }
  if (SSL_use_certificate(ssl, pair->leaf) != 1 || SSL_use_PrivateKey(ssl, pair->key) != 1 ||
      SSL_set1_chain(ssl, pair->chain) != 1)
    return 0;
  return 1;
}

bool TlsCredentials::setup(SSL_CTX& ctx) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_cert_cb(&ctx, &TlsCredentials::select_certificate, this);
  return true;
}

struct ConnectionDeadlines::Table {
  struct Entry {
    int fd;
    std::string peer;  // "address port", as httplib reports the remote end
    std::chrono::steady_clock::time_point deadline;
  };
  std::mutex mutex;
  std::uint64_t next_id = 1;
  std::uint64_t expired = 0;
  std::map<std::uint64_t, Entry> entries;
  std::unordered_map<std::string, std::uint64_t> by_peer;  // the entry of each peer's connection

  // Erases an entry and its peer's index; with mutex held.
  void forget(std::map<std::uint64_t, Entry>::iterator entry) {
    // A peer's port may already belong to a newer connection: only this one's index goes.
    if (const auto id = by_peer.find(entry->second.peer); id != by_peer.end() && id->second == entry->first)
      by_peer.erase(id);
    entries.erase(entry);
  }
};

struct ConnectionDeadlines::Connection {
  std::weak_ptr<Table> owner;  // expired once its ConnectionDeadlines is destroyed
  std::uint64_t id;
};

int ConnectionDeadlines::connection_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &ConnectionDeadlines::on_free);
  return index;
}

ConnectionDeadlines::ConnectionDeadlines(std::chrono::milliseconds limit)
    : limit_(limit), table_(std::make_shared<Table>()) {
  if (connection_index() < 0) throw Error("cannot set up connection deadlines: " + openssl_error());
  thread_ = std::thread([this] { watch(); });
}

ConnectionDeadlines::~ConnectionDeadlines() {
  {
    std::lock_guard<std::mutex> lock(table_->mutex);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ConnectionDeadlines::attach(SSL_CTX& ctx) {
  SSL_CTX_set_msg_callback(&ctx, &ConnectionDeadlines::on_message);
  SSL_CTX_set_msg_callback_arg(&ctx, this);
}

std::uint64_t ConnectionDeadlines::expired() const {
  std::lock_guard<std::mutex> lock(table_->mutex);
  return table_->expired;
}

// The first TLS record of a connection starts its clock.
void ConnectionDeadlines::on_message(int, int, int, const void*, size_t, SSL* ssl, void* arg) {
  if (SSL_get_ex_data(ssl, connection_index()) != nullptr) return;
  auto* self = static_cast<ConnectionDeadlines*>(arg);
  const int fd = SSL_get_fd(ssl);
  std::string peer;
  sockaddr_storage addr{};
  socklen_t addr_len = sizeof addr;
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (fd >= 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) == 0 &&
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), addr_len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0)
    peer = std::string(host) + " " + port;
  Table& table = *self->table_;
  std::lock_guard<std::mutex> lock(table.mutex);
  auto connection = std::make_unique<Connection>(Connection{self->table_, table.next_id++});
  // A connection whose record OpenSSL could not keep is not watched: on_free would never
  // forget it, and its fd could be shut down after it was reused.
  if (SSL_set_ex_data(ssl, connection_index(), connection.get()) != 1) return;
  const std::uint64_t id = connection.release()->id;
  table.entries[id] = {fd, peer, std::chrono::steady_clock::now() + self->limit_};
  if (!peer.empty()) table.by_peer[peer] = id;
}

void ConnectionDeadlines::handled(const std::string& peer_addr, int peer_port) {
  const std::string peer = peer_addr + " " + std::to_string(peer_port);
  const auto deadline = std::chrono::steady_clock::now() + limit_;
  std::lock_guard<std::mutex> lock(table_->mutex);
  const auto id = table_->by_peer.find(peer);
  if (id == table_->by_peer.end()) return;
  if (const auto entry = table_->entries.find(id->second); entry != table_->entries.end())
    entry->second.deadline = deadline;
}

// SSL_free: the connection is gone (httplib closes the socket after this), so its fd is
// never shut down once it may have been reused. Its owner may be gone before it.
void ConnectionDeadlines::on_free(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  const std::unique_ptr<Connection> connection(static_cast<Connection*>(ptr));
  if (!connection) return;
  const std::shared_ptr<Table> table = connection->owner.lock();
  if (!table) return;
  std::lock_guard<std::mutex> lock(table->mutex);
  if (const auto entry = table->entries.find(connection->id); entry != table->entries.end()) table->forget(entry);
}

void ConnectionDeadlines::watch() {
  Table& table = *table_;
  std::unique_lock<std::mutex> lock(table.mutex);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(200));
    const auto now = std::chrono::steady_clock::now();
    for (auto it = table.entries.begin(); it != table.entries.end();) {
      if (it->second.deadline < now) {
        if (it->second.fd >= 0) ::shutdown(it->second.fd, SHUT_RDWR);
        ++table.expired;
        table.forget(it++);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace gpurun
