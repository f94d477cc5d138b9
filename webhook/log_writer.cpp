#include "webhook/log_writer.hpp"

#include <errno.h>
#include <unistd.h>

namespace gpurun {

LogWriter::LogWriter(int fd, std::size_t max_pending)
    : fd_(fd), max_pending_(max_pending), thread_([this] { run(); }) {}

LogWriter::~LogWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

void LogWriter::write(const std::string& line) {
  bool was_empty = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    drained_.wait(lock, [&] { return pending_.size() < max_pending_; });
    was_empty = pending_.empty();
    pending_ += line;
  }
  // The thread waits only while nothing is pending: one wake-up per batch, not per line.
  if (was_empty) ready_.notify_one();
}

void LogWriter::run() {
  std::string batch;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ready_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stop_, and everything written
    batch.swap(pending_);
    lock.unlock();
    drained_.notify_all();
    for (std::size_t done = 0; done < batch.size();) {
      const ssize_t n = ::write(fd_, batch.data() + done, batch.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    batch.clear();
    lock.lock();
  }
}

}  // namespace gpurun
