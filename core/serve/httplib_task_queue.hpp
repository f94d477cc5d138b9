// cpp-httplib's task queue over ConnectionThreads: each accepted connection (its TLS handshake,
// then its requests) on a thread of its own. Header-only: only the servers that link cpp-httplib
// include it (gpu-run-webhook, the guard's metrics module).
#pragma once

#include <httplib.h>

#include <cstddef>
#include <functional>
#include <utility>

#include "serve/connection_threads.hpp"

namespace gpurun {

class ThreadPerConnection final : public httplib::TaskQueue {
 public:
  explicit ThreadPerConnection(std::size_t max_threads) : threads_(max_threads) {}
  void enqueue(std::function<void()> fn) override { threads_.enqueue(std::move(fn)); }
  void shutdown() override { threads_.shutdown(); }

 private:
  ConnectionThreads threads_;
};

}  // namespace gpurun
