#include "file_io.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "test_files.hpp"
#include "test_util.hpp"

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

}  // namespace
}  // namespace gpurun
