#include "serve/connection_threads.hpp"

#include <malloc.h>

#include <algorithm>
#include <system_error>
#include <thread>
#include <utility>

namespace gpurun {

ConnectionThreads::ConnectionThreads(std::size_t max_threads) : max_threads_(std::max<std::size_t>(1, max_threads)) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> task) {
  std::unique_lock lock(mutex_);
  if (running_ >= max_threads_) {
    waiting_.push_back(std::move(task));
    return;
  }
  ++running_;
  peak_ = std::max(peak_, running_);
  if (running_ > burst_) {
    burst_ = running_;
    trim_at_ = running_ / 2;
  }
  try {
    // Detached: a thread's stack goes back when it exits (joined later, 471 exited threads kept
    // 8.8 MiB of stack pages after a burst). shutdown() waits on running_ instead of joins; a
    // thread's last touch of this object is the unlock after its notify.
    std::thread([this, task = std::move(task)]() mutable { run(std::move(task)); }).detach();
  } catch (const std::system_error&) {
    // No thread to be had (RLIMIT_NPROC, memory): wait for a running one, or, with none, run it
    // here, on the accepting thread, rather than never.
    --running_;
    if (running_ > 0) {
      waiting_.push_back(std::move(task));
      return;
    }
    lock.unlock();
    task();
  }
}

void ConnectionThreads::run(std::function<void()> task) {
  for (;;) {
    task();
    task = nullptr;  // the connection's state goes with it, before the lock
    std::unique_lock lock(mutex_);
    if (waiting_.empty()) {
      --running_;
      idle_.notify_all();
      // Threads' memory (their TLS state, their malloc arenas' free chunks) is not given back to
      // the kernel by itself: after a burst of connections the RSS stayed 24 MiB above where it
      // started (bench/webhook/hostile). After a burst of kTrimFrom or more, trim each time the
      // connections have halved, down to none: a burst of 2,000 costs a dozen trims.
      if (burst_ >= kTrimFrom && running_ <= trim_at_) {
        trim_at_ = running_ / 2;
        if (running_ == 0) burst_ = 0;
        lock.unlock();
        malloc_trim(0);
      }
      return;
    }
    task = std::move(waiting_.front());
    waiting_.pop_front();
  }
}

void ConnectionThreads::shutdown() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return running_ == 0 && waiting_.empty(); });
}

std::size_t ConnectionThreads::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

std::size_t ConnectionThreads::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

std::size_t ConnectionThreads::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

}  // namespace gpurun
