#include "ctl/node/host_root.hpp"

#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/process.hpp"
#include "base/program.hpp"

namespace gpurun {
namespace {

using Clock = std::chrono::steady_clock;

// The probe's state, shared with nghttp2's callbacks.
struct CriProbe {
  int fd = -1;
  std::size_t answer_bytes = 0;  // of stream 1's DATA: a gRPC message prefix and the response
  bool closed = false;           // stream 1 closed, or the server sent GOAWAY
};

ssize_t send_frames(nghttp2_session*, const uint8_t* data, size_t length, int, void* user) {
  const int fd = static_cast<CriProbe*>(user)->fd;
  for (;;) {
    const ssize_t n = ::send(fd, data, length, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? static_cast<ssize_t>(NGHTTP2_ERR_CALLBACK_FAILURE) : n;
  }
}

int on_data(nghttp2_session*, uint8_t, int32_t stream, const uint8_t*, size_t length, void* user) {
  if (stream == 1) static_cast<CriProbe*>(user)->answer_bytes += length;
  return 0;
}

int on_close(nghttp2_session*, int32_t stream, uint32_t, void* user) {
  if (stream == 1) static_cast<CriProbe*>(user)->closed = true;
  return 0;
}

int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_GOAWAY) static_cast<CriProbe*>(user)->closed = true;
  return 0;
}

// An empty VersionRequest: the gRPC message prefix (not compressed, length 0) and end of stream.
ssize_t empty_grpc_message(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source*, void*) {
  constexpr size_t kPrefix = 5;
  if (length < kPrefix) return NGHTTP2_ERR_CALLBACK_FAILURE;
  std::memset(buf, 0, kPrefix);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return kPrefix;
}

nghttp2_nv header(const char* name, const char* value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name)), reinterpret_cast<uint8_t*>(const_cast<char*>(value)),
          std::strlen(name), std::strlen(value), NGHTTP2_NV_FLAG_NONE};
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

  CriProbe probe;
  probe.fd = fd.get();
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) throw Error("nghttp2: out of memory");
  nghttp2_session_callbacks_set_send_callback(callbacks, send_frames);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame);
  nghttp2_session* raw = nullptr;
  const int made = nghttp2_session_client_new(&raw, callbacks, &probe);
  nghttp2_session_callbacks_del(callbacks);
  if (made != 0) throw Error(std::string("nghttp2: ") + nghttp2_strerror(made));
  const std::unique_ptr<nghttp2_session, decltype(&nghttp2_session_del)> session(raw, nghttp2_session_del);

  const nghttp2_nv headers[] = {header(":method", "POST"),
                                header(":scheme", "http"),
                                header(":path", "/runtime.v1.RuntimeService/Version"),
                                header(":authority", "localhost"),
                                header("content-type", "application/grpc"),
                                header("te", "trailers")};
  nghttp2_data_provider body{};
  body.read_callback = empty_grpc_message;
  nghttp2_submit_settings(raw, NGHTTP2_FLAG_NONE, nullptr, 0);
  if (nghttp2_submit_request(raw, nullptr, headers, std::size(headers), &body, nullptr) < 0)
    throw Error("nghttp2: the RuntimeService.Version request was refused");

  for (;;) {
    if (const int sent = nghttp2_session_send(raw); sent != 0) {
      why = std::string("send: ") + nghttp2_strerror(sent);
      return false;
    }
    // A response message: its 5-byte prefix and a non-empty VersionResponse.
    if (probe.answer_bytes > 5) return true;
    if (probe.closed) {
      why = "RuntimeService.Version got no response (containerd without its CRI plugin?)";
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd.get(), POLLIN, 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      why = "no answer to RuntimeService.Version";
      return false;
    }
    uint8_t buffer[16384];
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      why = "the server closed the connection without an answer to RuntimeService.Version";
      return false;
    }
    if (const auto used = nghttp2_session_mem_recv(raw, buffer, static_cast<size_t>(got)); used < 0) {
      why = std::string("not an HTTP/2 answer: ") + nghttp2_strerror(static_cast<int>(used));
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
