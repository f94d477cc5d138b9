// ShmHandle: a process's /dev/shm sampled through a held descriptor, and nothing once the process
// has exited (the descriptor alone would go on reading the tmpfs).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "container.hpp"

namespace gpurun {
namespace {

TEST(ShmHandle, SamplesWhatThePathShows) {
  const ShmHandle h(::getpid());
  const auto by_handle = h.sample();
  const auto by_path = shm_usage_of_pid(::getpid());
  ASSERT_TRUE(by_handle);
  ASSERT_TRUE(by_path);
  EXPECT_EQ(by_handle->size, by_path->size);
}

TEST(ShmHandle, NothingOnceTheProcessHasExited) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const ShmHandle h(child);
  EXPECT_TRUE(h.sample());
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(h.sample());
  EXPECT_FALSE(ShmHandle(child).sample());  // a pid that is gone: no descriptor, no sample
}

}  // namespace
}  // namespace gpurun
