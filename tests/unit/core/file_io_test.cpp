#include "base/file_io.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using test::TempDir;

TEST(ReadSmallFile, Limits) {
  TempDir d;
  fs::path f = d.write("x", "12345");
  EXPECT_EQ(read_small_file(f, 5, "thing"), "12345");
  std::string m = error_of([&] { read_small_file(f, 4, "thing"); });
  EXPECT_EQ(m.rfind("thing " + f.string(), 0), 0u) << m;
  EXPECT_CONTAINS(m, "larger than 4 bytes");
}

TEST(ReadSmallFile, AWrongPathIsAUsageErrorAndASystemFailureIsNot) {
  TempDir d;
  const fs::path f = d.write("x", "12345");
  for (const fs::path& wrong : {d / "missing.json", f / "below-a-file.json"}) {
    const Error e = expect_error([&] { read_small_file(wrong, 100, "profile"); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << e.what();
  }
  EXPECT_EQ(expect_error([&] { read_small_file(d.path(), 100, "profile"); }).exit_code(), kExitUsage);
  // Out of file descriptors (EMFILE): the system failed, not the request. In a child, so the
  // limit does not reach the other tests.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const struct rlimit none = {0, 0};
    ::setrlimit(RLIMIT_NOFILE, &none);
    try {
      read_small_file(f, 100, "profile");
    } catch (const Error& e) {
      ::_exit(e.errno_value() == EMFILE ? e.exit_code() : 100);
    }
    ::_exit(101);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kExitFailure);
}

// read_below: the container-facing reads (a task's pid file, a pod's cgroup limit) through
// directories an engine or a kubelet made, no symlink followed on the way.
TEST(ReadBelow, ReadsAPlainFileOneComponentAtATime) {
  TempDir d;
  d.write("a/b/pid", "42\n");
  EXPECT_EQ(read_below(d.path(), "a/b/pid", 32), std::optional<std::string>("42\n"));
  EXPECT_EQ(read_below(d.path(), "a/b/none", 32), std::nullopt);
  EXPECT_EQ(read_below(d.path(), "a/b/pid", 2), std::nullopt);  // larger than asked
  EXPECT_EQ(read_below(d.path(), "a/b", 32), std::nullopt);     // a directory
}

TEST(ReadBelow, FollowsNoSymlinkAndNoDotDot) {
  TempDir d;
  d.write("outside/pid", "1");
  d.write("in/x/pid", "2");
  fs::create_directories(d / "in");
  fs::create_directory_symlink(d / "outside", d / "in/linked");
  fs::create_symlink(d / "outside/pid", d / "in/x/linkpid");
  EXPECT_EQ(read_below(d / "in", "linked/pid", 32), std::nullopt);  // a symlinked directory
  EXPECT_EQ(read_below(d / "in", "x/linkpid", 32), std::nullopt);   // a symlinked file
  EXPECT_EQ(read_below(d / "in", "x/../../outside/pid", 32), std::nullopt);
  EXPECT_EQ(read_below(d / "in", "..", 32), std::nullopt);
  EXPECT_EQ(read_below(d / "in", d / "outside/pid", 32), std::nullopt);  // absolute
  EXPECT_EQ(read_below(d / "in", "x/pid", 32), std::optional<std::string>("2"));
  ASSERT_EQ(::mkfifo((d / "in/x/fifo").c_str(), 0600), 0);
  EXPECT_EQ(read_below(d / "in", "x/fifo", 32), std::nullopt);  // not a regular file, and no wait on it
}

}  // namespace
}  // namespace gpurun
