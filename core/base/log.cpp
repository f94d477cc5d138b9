#include "base/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "base/clock.hpp"
#include "base/fd.hpp"

namespace gpurun {

LogLevel parse_log_level(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "debug") return LogLevel::kDebug;
  return LogLevel::kInfo;
}

FdSink::~FdSink() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

std::unique_ptr<FdSink> FdSink::append_to(const std::string& path) {
  const int fd = path.empty() ? -1 : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  return std::make_unique<FdSink>(fd, true);
}

void FdSink::write(const std::string& line) {
  if (fd_ >= 0) (void)!::write(fd_, line.data(), line.size());
}

std::string format_log_line(const std::string& program, LogLevel level, const std::string& message) {
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  std::string line = utc_timestamp(std::time(nullptr)) + " " + program + "[" + std::to_string(::getpid()) +
                     "] level=" + kNames[static_cast<int>(level)] + " ";
  line.reserve(line.size() + message.size() + 1);
  // One call, one line: a raw newline in a message (an unquoted value) must not start a
  // line that a reader would take for another entry.
  for (char c : message) {
    if (c == '\n')
      line += "\\n";
    else if (c == '\r')
      line += "\\r";
    else
      line += c;
  }
  line += '\n';
  return line;
}

Logger::Logger(std::string path, LogLevel level, std::string program)
    : Logger(FdSink::append_to(path), level, std::move(program)) {}

Logger::Logger(std::unique_ptr<LogSink> sink, LogLevel level, std::string program)
    : sink_(std::move(sink)), level_(level), program_(std::move(program)) {}

void Logger::log(LogLevel level, const std::string& message) const {
  if (level > level_ && !echo_) return;
  const std::string line = format_log_line(program_, level, message);
  if (echo_) FdSink(STDERR_FILENO, false).write(line);
  if (level > level_ || !sink_) return;
  sink_->write(line);
}

std::string log_quote(const std::string& value) {
  bool plain = !value.empty();
  for (unsigned char c : value)
    if (c <= ' ' || c == '"' || c == '\\' || c >= 0x7f || c == '=') plain = false;
  if (plain && value.size() <= 200) return value;
  std::string out = "\"";
  std::size_t n = 0;
  for (unsigned char c : value) {
    if (++n > 200) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace gpurun
