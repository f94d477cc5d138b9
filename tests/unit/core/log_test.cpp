#include "base/log.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using test::read_text;
namespace fs = std::filesystem;
using test::TempDir;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST(ParseLogLevel, Names) {
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("verbose"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level(""), LogLevel::kInfo);
}

TEST(Logger, OneLinePerCallAppended) {
  TempDir d;
  fs::path file = d.write("gpu-run.log", "existing line\n");
  Logger log(file.string(), LogLevel::kInfo, "gpu-run-hook");
  log.info("decision=resize shm=512m");
  log.warn("decision=skip reason=host-ipc");
  log.error("decision=fail");
  std::string text = read_text(file);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 4u) << text;
  EXPECT_EQ(lines[0], "existing line");
  const std::string pid = std::to_string(::getpid());
  const std::regex shape(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ gpu-run-hook\[)" + pid + R"(\] level=(\w+) (.*))");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[1], m, shape)) << lines[1];
  EXPECT_EQ(m[1], "info");
  EXPECT_EQ(m[2], "decision=resize shm=512m");
  ASSERT_TRUE(std::regex_match(lines[2], m, shape)) << lines[2];
  EXPECT_EQ(m[1], "warn");
  ASSERT_TRUE(std::regex_match(lines[3], m, shape)) << lines[3];
  EXPECT_EQ(m[1], "error");
}

TEST(Logger, LevelFilters) {
  TempDir d;
  fs::path file = d / "log";
  Logger log(file.string(), LogLevel::kWarn, "p");
  log.debug("a=1");
  log.info("a=2");
  log.warn("a=3");
  log.error("a=4");
  auto lines = lines_of(read_text(file));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("level=warn a=3"), std::string::npos);
  EXPECT_NE(lines[1].find("level=error a=4"), std::string::npos);
}

TEST(Logger, RawNewlineInAMessageStaysOneLine) {
  TempDir d;
  fs::path file = d / "log";
  Logger log(file.string(), LogLevel::kInfo, "p");
  log.info("reason=first\nlevel=error forged=1\r");
  auto lines = lines_of(read_text(file));
  ASSERT_EQ(lines.size(), 1u) << read_text(file);
  EXPECT_NE(lines[0].find(R"(reason=first\nlevel=error forged=1\r)"), std::string::npos) << lines[0];
}

TEST(Logger, EchoCopiesEveryLevelToStderr) {
  TempDir d;
  fs::path file = d / "log";
  Logger log(file.string(), LogLevel::kError, "p");
  log.set_echo(true);
  testing::internal::CaptureStderr();
  log.debug("seen=1");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("level=debug seen=1\n"), std::string::npos) << err;
  EXPECT_EQ(read_text(file), "");  // below the file's level
}

TEST(Logger, NeverThrows) {
  TempDir d;
  EXPECT_NO_THROW(Logger((d / "missing/dir/log").string(), LogLevel::kDebug, "p").error("x=1"));
  EXPECT_NO_THROW(Logger("", LogLevel::kDebug, "p").error("x=1"));
  fs::create_directories(d / "adir");
  EXPECT_NO_THROW(Logger((d / "adir").string(), LogLevel::kDebug, "p").error("x=1"));
}

TEST(Logger, DoesNotFollowASymlink) {
  TempDir d;
  fs::path target = d.write("target", "");
  fs::create_symlink(target, d / "log");
  Logger((d / "log").string(), LogLevel::kInfo, "p").info("x=1");
  EXPECT_EQ(read_text(target), "");
}

TEST(LogQuote, PlainValuesUnchanged) {
  EXPECT_EQ(log_quote("imagenet"), "imagenet");
  EXPECT_EQ(log_quote("/dev/shm"), "/dev/shm");
  EXPECT_EQ(log_quote("512m"), "512m");
}

TEST(LogQuote, QuotesAndEscapes) {
  EXPECT_EQ(log_quote(""), "\"\"");
  EXPECT_EQ(log_quote("two words"), "\"two words\"");
  EXPECT_EQ(log_quote("a\tb"), "\"a\\x09b\"");
  EXPECT_EQ(log_quote("line1\nline2"), "\"line1\\x0aline2\"");
  EXPECT_EQ(log_quote("cr\r"), "\"cr\\x0d\"");
  EXPECT_EQ(log_quote(std::string("nul\0byte", 8)), "\"nul\\x00byte\"");
  EXPECT_EQ(log_quote("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(log_quote("back\\slash"), "\"back\\\\slash\"");
  EXPECT_EQ(log_quote("k=v"), "\"k=v\"");  // would read as another key
  EXPECT_EQ(log_quote("\x1b[31mred"), "\"\\x1b[31mred\"");
  EXPECT_EQ(log_quote("del\x7f"), "\"del\\x7f\"");
  EXPECT_EQ(log_quote("\xc3\xa9"), "\"\\xc3\\xa9\"");  // bytes >= 0x7f, UTF-8 included
}

TEST(LogQuote, LongValuesTruncated) {
  std::string q = log_quote(std::string(250, 'a'));
  EXPECT_EQ(q, "\"" + std::string(200, 'a') + "...\"");
  EXPECT_EQ(log_quote(std::string(200, 'a')), std::string(200, 'a'));
}

TEST(LogQuote, OutputHasNoRawControlBytes) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (std::size_t start = 0; start < all.size(); start += 100) {
    std::string q = log_quote(all.substr(start, 100));
    for (unsigned char c : q) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  }
}

// Each line carries its writer and sequence number and a long filler, so a torn or
// interleaved write shows up as a line that does not match.
std::string payload(int writer, int seq) {
  return "writer=" + std::to_string(writer) + " seq=" + std::to_string(seq) + " pad=" + std::string(900, 'x') +
         " end=1";
}

void check_whole_lines(const std::string& text, int writers, int per_writer) {
  auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(writers * per_writer));
  const std::regex shape(R"(\S+ t\[\d+\] level=info writer=(\d+) seq=(\d+) pad=x{900} end=1)");
  std::vector<std::vector<bool>> seen(writers, std::vector<bool>(per_writer, false));
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, shape)) << line.substr(0, 120);
    int w = std::stoi(m[1]), s = std::stoi(m[2]);
    ASSERT_LT(w, writers);
    ASSERT_LT(s, per_writer);
    EXPECT_FALSE(seen[w][s]) << "duplicate " << w << "/" << s;
    seen[w][s] = true;
  }
}

TEST(Logger, ConcurrentThreadsWriteWholeLines) {
  TempDir d;
  fs::path file = d / "log";
  constexpr int kWriters = 8, kLines = 200;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      Logger log(file.string(), LogLevel::kInfo, "t");
      for (int s = 0; s < kLines; ++s) log.info(payload(w, s));
    });
  }
  for (auto& t : threads) t.join();
  check_whole_lines(read_text(file), kWriters, kLines);
}

TEST(Logger, ConcurrentProcessesWriteWholeLines) {
  TempDir d;
  fs::path file = d / "log";
  constexpr int kWriters = 6, kLines = 200;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Logger log(file.string(), LogLevel::kInfo, "t");
      for (int s = 0; s < kLines; ++s) log.info(payload(w, s));
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  check_whole_lines(read_text(file), kWriters, kLines);
}

// One format for every sink: a sink gets whole lines, the level filters, echo copies.
TEST(LogSinkTest, EverySinkGetsTheOneLineFormat) {
  struct Capture : LogSink {
    std::vector<std::string>* lines;
    explicit Capture(std::vector<std::string>* l) : lines(l) {}
    void write(const std::string& line) override { lines->push_back(line); }
  };
  std::vector<std::string> lines;
  const Logger log(std::make_unique<Capture>(&lines), LogLevel::kInfo, "gpu-run-webhook");
  log.info("event=review outcome=patched");
  log.debug("event=ignored");
  log.warn("two\nlines");
  ASSERT_EQ(lines.size(), 2u);
  // The timestamp is the line's first word; the two lines may be a second apart.
  const auto after_time = [](const std::string& line) { return line.substr(line.find(' ')); };
  EXPECT_EQ(after_time(lines[0]),
            after_time(format_log_line("gpu-run-webhook", LogLevel::kInfo, "event=review outcome=patched")));
  EXPECT_CONTAINS(lines[0], " gpu-run-webhook[" + std::to_string(::getpid()) + "] level=info event=review");
  EXPECT_EQ(lines[0].back(), '\n');
  EXPECT_CONTAINS(lines[1], "level=warn two\\nlines\n");
  EXPECT_EQ(lines[1].find('\n'), lines[1].size() - 1);
}

}  // namespace
}  // namespace gpurun
