#include "webhook/log_writer.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "base/temp_dir.hpp"

namespace gpurun {
namespace {

// Writes `per_thread` lines from each of `threads` threads through a LogWriter into a file and
// returns the file's text once the writer is gone.
std::string write_lines(int threads, int per_thread, std::size_t max_pending) {
  TempDir dir("log-writer-test");
  const fs::path file = dir / "log";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  {
    LogWriter log(fd, max_pending);
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t)
      writers.emplace_back([&log, t, per_thread] {
        for (int i = 0; i < per_thread; ++i)
          log.write("thread=" + std::to_string(t) + " line=" + std::to_string(i) + "\n");
      });
    for (auto& w : writers) w.join();
  }  // the destructor writes what is still queued
  ::close(fd);
  return read_small_file(file, 16 << 20, "the log");
}

// Each thread's lines, whole and in the order written, and nothing else.
void expect_every_line_in_order(const std::string& text, int threads, int per_thread) {
  std::map<int, int> next;
  std::istringstream in(text);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    int t = -1, i = -1;
    ASSERT_EQ(2, std::sscanf(line.c_str(), "thread=%d line=%d", &t, &i)) << line;
    EXPECT_EQ(next[t]++, i) << "thread " << t;
    ++lines;
  }
  EXPECT_EQ(threads * per_thread, lines);
  EXPECT_EQ('\n', text.back());
}

TEST(LogWriterTest, EveryLineFromManyThreadsWholeAndInOrder) {
  expect_every_line_in_order(write_lines(8, 2000, 1 << 20), 8, 2000);
}

TEST(LogWriterTest, AFullQueueMakesWritersWaitAndLosesNothing) {
  // 64 bytes queued at most: writers wait for the thread nearly on every line.
  expect_every_line_in_order(write_lines(4, 500, 64), 4, 500);
}

TEST(LogWriterTest, TheDestructorWritesWhatIsQueued) {
  const std::string text = write_lines(1, 3, 1 << 20);
  EXPECT_EQ("thread=0 line=0\nthread=0 line=1\nthread=0 line=2\n", text);
}

}  // namespace
}  // namespace gpurun
