#include "base/process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(SpawnTest, WaitReturnsTheExitCodeAnd128PlusTheSignal) {
  EXPECT_EQ(spawn({"true"}).wait(), 0);
  EXPECT_EQ(spawn({"sh", "-c", "exit 3"}).wait(), 3);
  EXPECT_EQ(spawn({"sh", "-c", "kill -9 $$"}).wait(), 128 + 9);
  EXPECT_EQ(spawn({"/bin/sh", "-c", "exit 7"}).wait(), 7) << "a path is run as given";
}

TEST(SpawnTest, AMissingProgramIsAClearErrorNotAChildThatExits127) {
  const Error e = expect_error([] { spawn({"gpu-run-no-such-program"}); });
  EXPECT_CONTAINS(e.what(), "cannot run gpu-run-no-such-program: No such file or directory");
  EXPECT_CONTAINS(e.what(), "check PATH");
  EXPECT_EQ(e.errno_value(), ENOENT);
  test::TempDir dir;
  const fs::path not_executable = dir.write("plain", "#!/bin/sh\nexit 0\n");
  EXPECT_CONTAINS(error_of([&] { spawn({not_executable.string()}); }),
                  "cannot run " + not_executable.string() + ": Permission denied");
  EXPECT_CONTAINS(error_of([] { run_capture({"gpu-run-no-such-program"}); }), "cannot run gpu-run-no-such-program");
  EXPECT_CONTAINS(error_of([] { spawn(std::vector<std::string>{}); }), "empty command");
}

TEST(SpawnTest, TheChildGetsTheGivenDescriptorsAndNullStdin) {
  const Captured c = run_capture({"sh", "-c", "echo out; echo err >&2; cat; exit 4"});
  EXPECT_EQ(c.exit_code, 4);
  EXPECT_EQ(c.out, "out\n") << "stdin is /dev/null: cat reads nothing";
  EXPECT_EQ(c.err, "err\n");
}

// gpu-run opens every descriptor O_CLOEXEC: a child sees none of them, so it holds no lock of
// the parent's (the guard's per-container flock) and no pipe end that would keep a reader waiting.
TEST(SpawnTest, NoCloseOnExecDescriptorReachesTheChild) {
  test::TempDir dir;
  const fs::path lock_path = dir.write("c.lock", "");
  int held = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  // The shell itself, not a program it starts, looks at its descriptor of that number.
  const Captured c = run_capture({"sh", "-c", "readlink /proc/$$/fd/" + std::to_string(held) + " || echo none"});
  EXPECT_EQ(c.out, "none\n") << "the child has the parent's descriptor " << held;
  // A child that had inherited the descriptor would keep the flock past the parent's close.
  Child child = spawn({"sleep", "30"});
  ::close(held);
  const int again = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(again, 0);
  EXPECT_EQ(::flock(again, LOCK_EX | LOCK_NB), 0) << "the running child holds no copy of the lock";
  ::close(again);
}

TEST(SpawnTest, TheChildStartsWithEverySignalAtItsDefault) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old {};
  ::sigaction(SIGTERM, &ignore, &old);
  Child child = spawn({"sleep", "30"});
  ::sigaction(SIGTERM, &old, nullptr);
  ::kill(child.pid(), SIGTERM);
  EXPECT_EQ(child.wait(), 128 + SIGTERM) << "an ignored SIGTERM would have let sleep run on";
}

}  // namespace
}  // namespace gpurun
