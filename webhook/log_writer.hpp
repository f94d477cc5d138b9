#pragma once

// gpu-run-webhook's log lines, written to a file descriptor (its stderr) by a thread of their
// own in the order given: a review's thread never waits on the write(2) of its line, which many
// threads writing at once take turns on (a file's inode lock, a pipe's mutex: bench/WEBHOOK.md),
// and lines queued meanwhile go out together in one write.

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

#include "base/log.hpp"

namespace gpurun {

// The webhook's LogSink (core/base/log.hpp): the one line format, written by its own thread.
class LogWriter : public LogSink {
 public:
  // `max_pending`: bytes queued before write() waits for the thread (no line is dropped).
  explicit LogWriter(int fd, std::size_t max_pending = 1 << 20);
  ~LogWriter() override;  // writes every queued line, then stops the thread
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // Queues one line (ending in its newline). Never throws for the log's sake: a write that
  // fails is dropped, as a log that cannot be written must not fail a review.
  void write(const std::string& line) override;

 private:
  void run();

  const int fd_;
  const std::size_t max_pending_;
  std::mutex mutex_;                 // guards pending_ and stop_
  std::condition_variable ready_;    // pending_ has lines, or stop_
  std::condition_variable drained_;  // pending_ was taken by the thread
  std::string pending_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpurun
