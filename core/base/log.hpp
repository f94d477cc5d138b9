#pragma once

#include <memory>
#include <string>

namespace gpurun {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Parses "error" | "warn" | "info" | "debug" (anything else: info).
LogLevel parse_log_level(const std::string& name);

// Where a log line goes: one handler type for every sink, as crun's output handler
// (src/libcrun/error.h: stderr, a file, syslog, journald behind one function type). A sink
// takes whole lines (ending in '\n') and never throws: a log that cannot be written must not
// fail a container or a review.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void write(const std::string& line) = 0;
};

// A file descriptor: each line in one write(2), so that concurrent writers on an O_APPEND file
// never interleave. Owns the descriptor when asked to.
class FdSink : public LogSink {
 public:
  FdSink(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~FdSink() override;
  FdSink(const FdSink&) = delete;
  FdSink& operator=(const FdSink&) = delete;
  // Opens `path` for appending (O_NOFOLLOW, 0640); a sink that drops every line when it cannot.
  static std::unique_ptr<FdSink> append_to(const std::string& path);
  void write(const std::string& line) override;

 private:
  int fd_;
  bool owned_;
};

// The one log line format of every gpu-run program:
// "<UTC time> <program>[<pid>] level=<level> <key=value ...>\n", a raw newline in `message`
// escaped so that one call is one line.
std::string format_log_line(const std::string& program, LogLevel level, const std::string& message);

// One line per event to a sink, at or below its level. Logging never throws.
class Logger {
 public:
  // Appends to the file at `path` (opened now, so lines still reach it after the caller
  // changes mount namespace); "" logs nowhere.
  Logger(std::string path, LogLevel level, std::string program);
  Logger(std::unique_ptr<LogSink> sink, LogLevel level, std::string program);
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  void log(LogLevel level, const std::string& message) const;
  void error(const std::string& m) const { log(LogLevel::kError, m); }
  void warn(const std::string& m) const { log(LogLevel::kWarn, m); }
  void info(const std::string& m) const { log(LogLevel::kInfo, m); }
  void debug(const std::string& m) const { log(LogLevel::kDebug, m); }

  // Also copy each line, of every level, to stderr (--debug).
  void set_echo(bool echo) { echo_ = echo; }

 private:
  std::unique_ptr<LogSink> sink_;
  LogLevel level_;
  std::string program_;
  bool echo_ = false;
};

// Quotes a value for a key=value log line when it has spaces, quotes or control bytes.
std::string log_quote(const std::string& value);

}  // namespace gpurun
