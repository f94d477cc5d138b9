#pragma once

#include <string>

namespace gpurun {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Parses "error" | "warn" | "info" | "debug" (anything else: info).
LogLevel parse_log_level(const std::string& name);

// Appends one line per decision to a file ("<time> <program> level=... key=value ...").
// Each line goes out in a single O_APPEND write, so concurrent writers never interleave.
// Logging never throws: a log that cannot be written must not fail a container.
class Logger {
 public:
  // Opens the file now (so lines still reach it after the caller changes mount namespace).
  Logger(std::string path, LogLevel level, std::string program);
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  void log(LogLevel level, const std::string& message) const;
  void error(const std::string& m) const { log(LogLevel::kError, m); }
  void warn(const std::string& m) const { log(LogLevel::kWarn, m); }
  void info(const std::string& m) const { log(LogLevel::kInfo, m); }
  void debug(const std::string& m) const { log(LogLevel::kDebug, m); }

  // Also copy each line to stderr (--debug).
  void set_echo(bool echo) { echo_ = echo; }

 private:
  std::string path_;
  int fd_ = -1;
  LogLevel level_;
  std::string program_;
  bool echo_ = false;
};

// Quotes a value for a key=value log line when it has spaces, quotes or control bytes.
std::string log_quote(const std::string& value);

}  // namespace gpurun
