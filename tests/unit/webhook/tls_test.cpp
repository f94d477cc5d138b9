#include "webhook/tls.hpp"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "base/fd.hpp"
#include "serve/openssl_util.hpp"

namespace gpurun {
namespace {
namespace tls_test {

using namespace std::chrono_literals;

using SslPtr = OpensslPtr<SSL, SSL_free>;
using SslCtxPtr = OpensslPtr<SSL_CTX, SSL_CTX_free>;

// ConnectionDeadlines' watchdog looks every 200 ms: long enough for it to have acted twice.
constexpr auto kTwoWatches = 500ms;

// A server context watched by `deadlines`. It has no certificate: the client's first record
// (its ClientHello) starts the connection's clock, then the handshake fails, as these tests
// need no more.
SslCtxPtr watched_context(ConnectionDeadlines& deadlines) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) ADD_FAILURE() << "SSL_CTX_new: " << openssl_error();
  deadlines.attach(*ctx);
  return ctx;
}

// One connection over a socket pair: a client that sent its ClientHello and a server SSL of
// `ctx` that read it.
struct Connection {
  UniqueFd server_fd, client_fd;  // outlive the SSLs below
  SslPtr client, server;

  explicit Connection(SSL_CTX& ctx) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
      ADD_FAILURE() << "socketpair: errno " << errno;
      return;
    }
    server_fd = UniqueFd(fds[0]);
    client_fd = UniqueFd(fds[1]);
    static SSL_CTX* const client_ctx = SSL_CTX_new(TLS_client_method());
    client.reset(SSL_new(client_ctx));
    server.reset(SSL_new(&ctx));
    SSL_set_fd(client.get(), client_fd.get());
    SSL_set_fd(server.get(), server_fd.get());
    EXPECT_EQ(SSL_connect(client.get()), -1);  // the ClientHello went out; it waits for the answer
    SSL_accept(server.get());
    ERR_clear_error();
  }

  // The server's end was shut down: the client reads EOF after what the server sent.
  bool closed_by_server() const {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(client_fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0) return false;  // EAGAIN: still open
    }
  }
};

bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

TEST(ConnectionDeadlinesTest, EachClosesOnlyItsOwnConnectionsPastTheirDeadline) {
  ConnectionDeadlines quick(100ms);
  ConnectionDeadlines slow(1h);
  SslCtxPtr quick_ctx = watched_context(quick);
  SslCtxPtr slow_ctx = watched_context(slow);
  Connection a(*quick_ctx);
  Connection b(*slow_ctx);
  ASSERT_TRUE(eventually([&] { return quick.expired() == 1; })) << "quick.expired() = " << quick.expired();
  EXPECT_TRUE(a.closed_by_server());
  std::this_thread::sleep_for(kTwoWatches);
  EXPECT_EQ(slow.expired(), 0u);
  EXPECT_FALSE(b.closed_by_server());
}

TEST(ConnectionDeadlinesTest, AFreedConnectionIsForgottenByItsOwnerOnly) {
  // Both number their first connection 1. Freeing b's SSL must reach second, not first: b
  // is never closed (its fd may belong to another file by then), a still is.
  ConnectionDeadlines first(500ms);
  ConnectionDeadlines second(500ms);
  SslCtxPtr first_ctx = watched_context(first);
  SslCtxPtr second_ctx = watched_context(second);
  Connection a(*first_ctx);
  Connection b(*second_ctx);
  b.server.reset();
  ASSERT_TRUE(eventually([&] { return first.expired() == 1; })) << "first.expired() = " << first.expired();
  EXPECT_TRUE(a.closed_by_server());
  std::this_thread::sleep_for(kTwoWatches);
  EXPECT_EQ(second.expired(), 0u);
  EXPECT_FALSE(b.closed_by_server());
}

TEST(ConnectionDeadlinesTest, OneDestroyedLeavesTheOtherWorking) {
  auto gone = std::make_unique<ConnectionDeadlines>(1h);
  ConnectionDeadlines kept(500ms);
  SslCtxPtr gone_ctx = watched_context(*gone);
  SslCtxPtr kept_ctx = watched_context(kept);
  Connection orphan(*gone_ctx);
  gone.reset();
  // An SSL freed after its ConnectionDeadlines: nothing of the destroyed one is touched (ASan
  // would report it), nor of the other.
  orphan.server.reset();
  Connection freed(*kept_ctx);
  Connection open(*kept_ctx);
  freed.server.reset();
  ASSERT_TRUE(eventually([&] { return kept.expired() == 1; })) << "kept.expired() = " << kept.expired();
  EXPECT_TRUE(open.closed_by_server());
  std::this_thread::sleep_for(kTwoWatches);
  EXPECT_EQ(kept.expired(), 1u);
  EXPECT_FALSE(freed.closed_by_server());
}

}  // namespace tls_test
}  // namespace
}  // namespace gpurun
