#include "ctl/node/host_root.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/process.hpp"
#include "base/program.hpp"

namespace gpurun {
namespace {

using Clock = std::chrono::steady_clock;

// HTTP/2 (RFC 9113): frame types and flags the probe uses.
constexpr std::uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4, kGoAway = 0x7;
constexpr std::uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, const std::string& payload) {
  std::string f;
  const auto n = static_cast<std::uint32_t>(payload.size());
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((stream >> shift) & 0xff);
  return f + payload;
}

// HPACK's "literal header field without indexing, new name", no Huffman: names and values
// shorter than 127 bytes.
std::string literal_field(const std::string& name, const std::string& value) {
  return std::string(1, '\0') + static_cast<char>(name.size()) + name + static_cast<char>(value.size()) + value;
}

// Reads exactly `n` bytes before `deadline`; false on timeout, EOF or error.
bool read_exact(int fd, std::string& out, std::size_t n, Clock::time_point deadline) {
  out.clear();
  while (out.size() < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char buffer[4096];
    const ssize_t got = ::read(fd, buffer, std::min(sizeof buffer, n - out.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  return true;
}

bool send_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

fs::path under_root(const fs::path& root, const fs::path& host_path) { return root / host_path.relative_path(); }

void run_in_root(const fs::path& root, const std::string& what, const std::function<void()>& body) {
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid < 0) throw system_error(what + ": fork", errno);
  if (pid == 0) {
    int code = kExitOk;
    if (::chroot(root.c_str()) != 0 || ::chdir("/") != 0) {
      print_error("gpu-run-ctl", what + ": chroot " + root.string() + ": " + std::strerror(errno));
      ::_exit(kExitFailure);
    }
    try {
      body();
    } catch (const Error& e) {
      print_error("gpu-run-ctl", e.what());
      code = e.exit_code();
    } catch (const std::exception& e) {
      print_error("gpu-run-ctl", e.what());
      code = kExitFailure;
    }
    std::cout.flush();
    std::cerr.flush();
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw system_error(what + ": waitpid", errno);
  const int code = exit_code_of(status);
  if (code != 0)
    throw Error(what + " in " + root.string() + " failed (its reason above); nothing after it was done", 0, code);
}

void restart_containerd(const std::optional<std::string>& command) {
  if (command) {
    const int code = spawn({"/bin/sh", "-c", *command}).wait();
    if (code != 0)
      throw Error("--restart-command '" + *command + "' exited with status " + std::to_string(code) +
                  ": restart containerd by hand, then run this again");
    return;
  }
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid < 0) throw system_error("restart containerd: fork", errno);
  if (pid == 0) {
    // The mount namespace last: /proc/1/ns/* of the others is read through this one's /proc.
    for (const char* ns : {"ipc", "uts", "net", "mnt"}) {
      const std::string path = std::string("/proc/1/ns/") + ns;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, 0) != 0) {
        print_error("gpu-run-ctl", "restart containerd: enter the host's namespace " + path + ": " +
                                       std::strerror(errno) +
                                       " (the pod needs hostPID and SYS_ADMIN; or give --restart-command)");
        ::_exit(kExitFailure);
      }
      ::close(fd);
    }
    const char* argv[] = {"systemctl", "restart", "containerd", nullptr};
    ::execvp(argv[0], const_cast<char* const*>(argv));
    print_error("gpu-run-ctl", std::string("restart containerd: run systemctl on the host: ") + std::strerror(errno) +
                                   " (a host without systemd: give --restart-command)");
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw system_error("restart containerd: waitpid", errno);
  const int code = exit_code_of(status);
  if (code != 0)
    throw Error("`systemctl restart containerd` on the host exited with status " + std::to_string(code) +
                ": see `journalctl -u containerd` there (a host without systemd: give --restart-command)");
}

bool cri_answers(const fs::path& socket, std::chrono::milliseconds timeout, std::string& why) {
  const auto deadline = Clock::now() + timeout;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw system_error("socket", errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket.string().size() >= sizeof addr.sun_path) {
    why = "the socket's path is longer than a unix socket's";
    return false;
  }
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    why = std::string("connect: ") + std::strerror(errno);
    return false;
  }
  const std::string headers = literal_field(":method", "POST") + literal_field(":scheme", "http") +
                              literal_field(":path", "/runtime.v1.RuntimeService/Version") +
                              literal_field(":authority", "localhost") +
                              literal_field("content-type", "application/grpc") + literal_field("te", "trailers");
  // An empty VersionRequest: the gRPC message prefix (not compressed, length 0).
  const std::string request = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(kSettings, 0, 0, "") +
                              frame(kHeaders, kEndHeaders, 1, headers) +
                              frame(kData, kEndStream, 1, std::string(5, '\0'));
  if (!send_all(fd.get(), request)) {
    why = std::string("send: ") + std::strerror(errno);
    return false;
  }
  std::string head, payload;
  for (;;) {
    if (!read_exact(fd.get(), head, 9, deadline)) {
      why = "no answer to RuntimeService.Version";
      return false;
    }
    const std::size_t length = (static_cast<std::uint8_t>(head[0]) << 16) | (static_cast<std::uint8_t>(head[1]) << 8) |
                               static_cast<std::uint8_t>(head[2]);
    const auto type = static_cast<std::uint8_t>(head[3]);
    const auto flags = static_cast<std::uint8_t>(head[4]);
    const std::uint32_t stream = ((static_cast<std::uint8_t>(head[5]) & 0x7fu) << 24) |
                                 (static_cast<std::uint8_t>(head[6]) << 16) |
                                 (static_cast<std::uint8_t>(head[7]) << 8) | static_cast<std::uint8_t>(head[8]);
    if (length > (1u << 20) || !read_exact(fd.get(), payload, length, deadline)) {
      why = "a malformed HTTP/2 frame";
      return false;
    }
    if (type == kSettings && !(flags & kAck) && !send_all(fd.get(), frame(kSettings, kAck, 0, ""))) {
      why = "send: the SETTINGS acknowledgement";
      return false;
    }
    if (stream != 1 && type != kGoAway) continue;
    // A response message: its 5-byte prefix and a non-empty VersionResponse.
    if (type == kData && payload.size() > 5) return true;
    if (type == kRstStream || type == kGoAway || (type == kHeaders && (flags & kEndStream))) {
      why = "RuntimeService.Version got no response (containerd without its CRI plugin?)";
      return false;
    }
  }
}

void wait_for_cri(const fs::path& socket, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string why = "not tried";
  for (;;) {
    if (cri_answers(socket, std::chrono::milliseconds(2000), why)) return;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  throw Error("containerd's CRI on " + socket.string() + " did not answer within " + std::to_string(timeout.count()) +
              " s (" + why + "): see containerd's log on the node (journalctl -u containerd); its config may not load");
}

}  // namespace gpurun
