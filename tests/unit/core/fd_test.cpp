#include "base/fd.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

using test::read_text;
namespace fs = std::filesystem;
using test::TempDir;

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(UniqueFd, ClosesAndMoves) {
  int raw[2];
  ASSERT_EQ(::pipe2(raw, O_CLOEXEC), 0);
  ::close(raw[1]);
  {
    UniqueFd a(raw[0]);
    EXPECT_TRUE(a);
    EXPECT_EQ(a.get(), raw[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(b.get(), raw[0]);
    UniqueFd c;
    EXPECT_FALSE(c);
    c = std::move(b);
    EXPECT_EQ(c.get(), raw[0]);
    EXPECT_TRUE(is_open(raw[0]));
  }
  EXPECT_FALSE(is_open(raw[0]));
}

TEST(UniqueFd, ReleaseGivesUpOwnership) {
  int raw[2];
  ASSERT_EQ(::pipe2(raw, O_CLOEXEC), 0);
  int kept;
  {
    UniqueFd a(raw[0]);
    kept = a.release();
    EXPECT_FALSE(a);
  }
  EXPECT_TRUE(is_open(kept));
  ::close(kept);
  ::close(raw[1]);
}

TEST(UniqueFd, AssignmentClosesThePrevious) {
  int p1[2], p2[2];
  ASSERT_EQ(::pipe2(p1, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(p2, O_CLOEXEC), 0);
  UniqueFd a(p1[0]);
  a = UniqueFd(p2[0]);
  EXPECT_FALSE(is_open(p1[0]));
  EXPECT_TRUE(is_open(p2[0]));
  ::close(p1[1]);
  ::close(p2[1]);
}

TEST(ReadBounded, ReadsToEofWithinTheLimit) {
  TempDir d;
  std::string data(100000, 'z');  // more than one 16 KiB read and more than a pipe buffer
  data[0] = 'a';
  data.back() = 'b';
  fs::path f = d.write("data", data);
  UniqueFd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  EXPECT_EQ(read_bounded(fd.get(), 100000, "data"), data);
}

TEST(ReadBounded, RefusesOneByteOverTheLimit) {
  TempDir d;
  fs::path f = d.write("data", std::string(100000, 'z'));
  UniqueFd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  try {
    read_bounded(fd.get(), 99999, "state on stdin");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state on stdin: more than 99999 bytes"), std::string::npos) << e.what();
  }
}

TEST(ReadBounded, FromAPipe) {
  int raw[2];
  ASSERT_EQ(::pipe2(raw, O_CLOEXEC), 0);
  UniqueFd r(raw[0]), w(raw[1]);
  std::thread writer([&] {
    write_all(w.get(), std::string(200000, 'p'), "pipe");
    w = UniqueFd();
  });
  std::string got = read_bounded(r.get(), 1 << 20, "pipe");
  writer.join();
  EXPECT_EQ(got.size(), 200000u);
  EXPECT_EQ(got.find_first_not_of('p'), std::string::npos);
}

TEST(ReadBounded, EmptyAndBadFd) {
  int raw[2];
  ASSERT_EQ(::pipe2(raw, O_CLOEXEC), 0);
  ::close(raw[1]);
  UniqueFd r(raw[0]);
  EXPECT_EQ(read_bounded(r.get(), 0, "empty"), "");
  try {
    read_bounded(-1, 10, "nothing");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.errno_value(), EBADF);
    EXPECT_EQ(e.exit_code(), kExitFailure);
    EXPECT_EQ(std::string(e.what()).rfind("nothing: read", 0), 0u) << e.what();
  }
}

bool has_temp_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".gpu-run-tmp.") != std::string::npos) return true;
  return false;
}

TEST(WriteFileAtomic, CreatesAndReplaces) {
  TempDir d;
  fs::path f = d / "config.json";
  write_file_atomic(f.string(), "first");
  EXPECT_EQ(read_text(f), "first");
  d.write("config.json", "a much longer old content that must not leave a tail behind");
  write_file_atomic(f.string(), "new");
  EXPECT_EQ(read_text(f), "new");
  EXPECT_FALSE(has_temp_files(d.path()));
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(d.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST(WriteFileAtomic, VolatileReplacesTheSameWay) {
  TempDir d;
  fs::path f = d / "config.json";
  d.write("config.json", "an old spec, longer than the new one");
  write_file_atomic(f.string(), "{}", 0640, Durability::kVolatile);
  EXPECT_EQ(read_text(f), "{}");
  EXPECT_FALSE(has_temp_files(d.path()));
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST(WriteFileAtomic, KeepsTheModeDespiteUmask) {
  TempDir d;
  fs::path f = d / "daemon.json";
  mode_t old = ::umask(077);
  write_file_atomic(f.string(), "{}", 0644);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  write_file_atomic(f.string(), "{}", 0600);
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(WriteFileAtomic, GivesTheFileToTheOwnerBeforeItAppears) {
  TempDir d;
  fs::path f = d / "config.toml";
  // As root, another user's (nobody); otherwise only our own ids can be given.
  const FileOwner owner = ::geteuid() == 0 ? FileOwner{65534, 65534} : FileOwner{::geteuid(), ::getegid()};
  write_file_atomic(f.string(), "version = 2\n", 0600, Durability::kVolatile, owner);
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, owner.uid);
  EXPECT_EQ(st.st_gid, owner.gid);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_FALSE(has_temp_files(d.path()));
}

TEST(WriteFileAtomic, ReplacesASymlinkRatherThanWritingThroughIt) {
  TempDir d;
  fs::path target = d.write("elsewhere", "untouched");
  fs::create_symlink(target, d / "link");
  write_file_atomic((d / "link").string(), "mine");
  EXPECT_FALSE(fs::is_symlink(d / "link"));
  EXPECT_EQ(read_text(d / "link"), "mine");
  EXPECT_EQ(read_text(target), "untouched");
}

TEST(WriteFileAtomic, FailureLeavesNothingBehind) {
  TempDir d;
  EXPECT_THROW(write_file_atomic((d / "no/such/dir/file").string(), "x"), Error);
  // Renaming over a non-empty directory fails: the temp file must be cleaned up.
  d.write("target/inside", "x");
  EXPECT_THROW(write_file_atomic((d / "target").string(), "x"), Error);
  EXPECT_FALSE(has_temp_files(d.path()));
  EXPECT_EQ(read_text(d / "target/inside"), "x");
}

TEST(WriteAll, LargeWriteThroughAPipe) {
  int raw[2];
  ASSERT_EQ(::pipe2(raw, O_CLOEXEC), 0);
  UniqueFd r(raw[0]), w(raw[1]);
  const std::string data(300000, 'w');
  std::string got;
  std::thread reader([&] { got = read_bounded(r.get(), 1 << 20, "pipe"); });
  write_all(w.get(), data, "pipe");
  w = UniqueFd();
  reader.join();
  EXPECT_EQ(got, data);
}

}  // namespace
}  // namespace gpurun
