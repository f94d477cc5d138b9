#include "log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "clock.hpp"
#include "fd.hpp"

namespace gpurun {

LogLevel parse_log_level(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "debug") return LogLevel::kDebug;
  return LogLevel::kInfo;
}

Logger::Logger(std::string path, LogLevel level, std::string program)
    : path_(std::move(path)), level_(level), program_(std::move(program)) {
  if (!path_.empty()) fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
}

Logger::~Logger() {
  if (fd_ >= 0) ::close(fd_);
}

void Logger::log(LogLevel level, const std::string& message) const {
  if (level > level_ && !echo_) return;
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  std::string line = utc_timestamp(std::time(nullptr)) + " " + program_ + "[" + std::to_string(::getpid()) +
                     "] level=" + kNames[static_cast<int>(level)] + " ";
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
  if (echo_) (void)!::write(STDERR_FILENO, line.data(), line.size());
  if (level > level_ || fd_ < 0) return;
  (void)!::write(fd_, line.data(), line.size());
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
