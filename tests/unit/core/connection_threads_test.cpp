// ConnectionThreads: a thread per task up to the cap, the rest wait for a free one, shutdown
// waits for all. Tasks block on a gate, as connections in a handshake do.
#include "serve/connection_threads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

namespace gpurun {
namespace {

struct TaskGate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [this] { return open; });
  }
  void release() {
    std::lock_guard lock(m);
    open = true;
    cv.notify_all();
  }
};

template <typename F>
bool within_two_seconds(F f) {
  for (int i = 0; i < 2000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// 200 blocked tasks (idle sockets in their handshake) do not keep the 201st from running.
TEST(ConnectionThreads, ABlockedTaskDoesNotHoldBackTheNext) {
  ConnectionThreads threads(1000);
  TaskGate gate;
  std::atomic<int> started{0};
  for (int i = 0; i < 200; ++i)
    threads.enqueue([&] {
      ++started;
      gate.wait();
    });
  std::atomic<bool> ran{false};
  threads.enqueue([&] { ran = true; });
  EXPECT_TRUE(within_two_seconds([&] { return ran.load(); }));
  EXPECT_TRUE(within_two_seconds([&] { return started == 200; }));
  EXPECT_EQ(threads.waiting(), 0u);
  gate.release();
  threads.shutdown();
  EXPECT_EQ(threads.running(), 0u);
  EXPECT_EQ(threads.peak(), 201u);
}

// At the cap a task waits, and runs on the first thread that finishes.
TEST(ConnectionThreads, AtTheCapTasksWaitForAFreeThread) {
  ConnectionThreads threads(2);
  TaskGate gate;
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i)
    threads.enqueue([&] {
      gate.wait();
      ++done;
    });
  EXPECT_EQ(threads.running(), 2u);
  EXPECT_EQ(threads.waiting(), 3u);
  gate.release();
  threads.shutdown();
  EXPECT_EQ(done, 5);
  EXPECT_EQ(threads.peak(), 2u);
  EXPECT_EQ(threads.waiting(), 0u);
}

int process_threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// A thread is gone when its connection is, with no new connection to reap it (joined lazily, 471
// exited threads once kept their stacks after a burst).
TEST(ConnectionThreads, ThreadsAreGoneWhenTheirTasksAre) {
  // The threads of the tests before exit after their last notify: wait for this one alone.
  ASSERT_TRUE(within_two_seconds([] { return process_threads() == 1; })) << process_threads() << " threads";
  const int before = 1;
  ConnectionThreads threads(1000);
  TaskGate gate;
  for (int i = 0; i < 100; ++i) threads.enqueue([&] { gate.wait(); });
  EXPECT_TRUE(within_two_seconds([&] { return process_threads() >= before + 100; }));
  gate.release();
  EXPECT_TRUE(within_two_seconds([&] { return process_threads() == before; }))
      << process_threads() << " threads, " << before << " before";
  std::atomic<int> done{0};
  for (int i = 0; i < 2000; ++i) threads.enqueue([&] { ++done; });
  threads.shutdown();
  EXPECT_EQ(done, 2000);
  EXPECT_EQ(threads.running(), 0u);
  // Reusable after a shutdown (the server object outlives one listen).
  threads.enqueue([&] { ++done; });
  threads.shutdown();
  EXPECT_EQ(done, 2001);
}

}  // namespace
}  // namespace gpurun
