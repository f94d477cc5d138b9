// A thread for each connection, started when it is accepted and gone when it closes, up to a cap.
//
// cpp-httplib hands each accepted socket to its task queue, and the task runs the TLS handshake,
// then every request of the kept-alive connection. Its ThreadPool has a fixed number of threads,
// so sockets that connect and send nothing (or stop mid-handshake) hold them all and a real
// review waits for --io-timeout (issue: 64 idle sockets stalled every review for 9.5 s). Here no
// connection waits for another one's handshake, as with Go's net/http (a goroutine per
// connection). Beyond `max_threads` open connections a new one waits for a free thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace gpurun {

class ConnectionThreads {
 public:
  explicit ConnectionThreads(std::size_t max_threads);
  ~ConnectionThreads();
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;

  // Runs `task` on a thread of its own, or, at the cap, on the first thread that finishes.
  void enqueue(std::function<void()> task);
  // Waits until every task has run.
  void shutdown();

  std::size_t running() const;
  std::size_t waiting() const;
  std::size_t peak() const;

 private:
  void run(std::function<void()> task);

  const std::size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> waiting_;
  std::size_t running_ = 0;
  std::size_t peak_ = 0;
  std::size_t burst_ = 0;    // the most threads running since they were last all gone
  std::size_t trim_at_ = 0;  // the next malloc_trim when no more than this many run
  static constexpr std::size_t kTrimFrom = 64;
};

}  // namespace gpurun
