#include "shm/remount_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <vector>

#include "base/error.hpp"

namespace gpurun {
namespace {

// A pipe whose read end does not block; both ends close on exec (spawn dup2s the write end).
void make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw system_error("pipe", errno);
  read_end = UniqueFd(fds[0]);
  write_end = UniqueFd(fds[1]);
  if (::fcntl(read_end.get(), F_SETFL, O_NONBLOCK) != 0) throw system_error("fcntl O_NONBLOCK", errno);
}

// The helper writes one short line; more is not its report.
constexpr std::size_t kMaxOutput = 64 << 10;

}  // namespace

RemountJob::RemountJob(const std::filesystem::path& helper, const RemountRequest& request,
                       std::chrono::milliseconds deadline)
    : helper_(helper.string()), deadline_(Clock::now() + deadline), allowed_(deadline) {
  UniqueFd out_w, err_w;
  make_pipe(out_, out_w);
  make_pipe(err_, err_w);
  SpawnSpec spec;
  spec.argv = {helper_, "--remount"};
  for (std::string& a : remount_args(request)) spec.argv.push_back(std::move(a));
  spec.null_stdin = true;
  spec.stdout_fd = out_w.get();
  spec.stderr_fd = err_w.get();
  try {
    child_ = spawn(spec);
  } catch (const Error& e) {
    throw e.with_context("remount /dev/shm of pid " + std::to_string(request.pid));
  }
}

void RemountJob::read_available(int timeout_ms) {
  struct pollfd fds[2] = {{out_.get(), POLLIN, 0}, {err_.get(), POLLIN, 0}};
  if (!out_ && !err_) return;
  if (::poll(fds, 2, timeout_ms) <= 0) return;  // nothing yet, or EINTR: the next step reads
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    UniqueFd& fd = i == 0 ? out_ : err_;
    std::string& text = i == 0 ? out_text_ : err_text_;
    while (fd) {
      const ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        text.append(buf, std::min(static_cast<std::size_t>(n), kMaxOutput - std::min(kMaxOutput, text.size())));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      fd = UniqueFd();  // EOF (or an error): the helper has closed it
    }
  }
}

namespace {

// Killed helpers not yet reaped. A zombie keeps its pid, so waiting for one of these cannot reach
// another process.
std::mutex g_killed_mutex;
std::vector<pid_t> g_killed;

}  // namespace

std::size_t RemountJob::reap_killed() {
  const std::lock_guard<std::mutex> lock(g_killed_mutex);
  g_killed.erase(std::remove_if(g_killed.begin(), g_killed.end(),
                                [](pid_t pid) {
                                  int status = 0;
                                  return ::waitpid(pid, &status, WNOHANG) != 0;  // reaped, or not ours
                                }),
                 g_killed.end());
  return g_killed.size();
}

std::optional<RemountOutcome> RemountJob::step(int timeout_ms) {
  reap_killed();
  if (child_.pid() < 0) return RemountOutcome{std::nullopt, "remount /dev/shm: the helper has finished already"};
  read_available(timeout_ms);
  int code = 0;
  if (!out_ && !err_ && child_.poll(code)) return parse_remount_report(out_text_, err_text_, code, helper_);
  if (Clock::now() < deadline_) return std::nullopt;
  // Past the deadline: killed, and reaped if it dies within 20 ms; else left to reap_killed (a
  // helper stuck in the kernel cannot be waited for without stalling the loop).
  const pid_t pid = child_.release();
  ::kill(pid, SIGKILL);
  int status = 0;
  int reaped = 0;
  for (int i = 0; i < 20 && (reaped = ::waitpid(pid, &status, WNOHANG)) == 0; ++i) ::usleep(1000);
  if (reaped == 0) {
    const std::lock_guard<std::mutex> lock(g_killed_mutex);
    g_killed.push_back(pid);
  }
  out_ = UniqueFd();
  err_ = UniqueFd();
  RemountOutcome timed_out;
  timed_out.error =
      "remount /dev/shm: " + helper_ + " did not finish within " + std::to_string(allowed_.count()) + " ms: killed";
  timed_out.err = ETIMEDOUT;
  return timed_out;
}

RemountOutcome RemountJob::wait() {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (auto done = step(static_cast<int>(std::clamp<long long>(left, 0, 50)))) return *done;
  }
}

}  // namespace gpurun
