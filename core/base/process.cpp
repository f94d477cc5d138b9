#include "base/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/error.hpp"
#include "base/fd.hpp"

namespace gpurun {
namespace {

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// posix_spawn's attribute and file-action objects, destroyed with the scope.
class SpawnAttributes {
 public:
  SpawnAttributes() {
    ::posix_spawnattr_init(&attr_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attr_);
  }
  posix_spawnattr_t* attr() { return &attr_; }
  posix_spawn_file_actions_t* actions() { return &actions_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

void check_spawn(int rc, const char* what) {
  if (rc != 0) throw system_error(std::string("spawn: ") + what, rc);
}

}  // namespace

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

int Child::wait() {
  int status = 0;
  while (::waitpid(pid_.get(), &status, 0) < 0) {
    if (errno != EINTR) throw system_error("wait for pid " + std::to_string(pid_.get()), errno);
  }
  pid_.release();
  return exit_code_of(status);
}

bool Child::poll(int& code) {
  int status = 0;
  const pid_t r = ::waitpid(pid_.get(), &status, WNOHANG);
  if (r == 0) return false;
  if (r < 0) throw system_error("wait for pid " + std::to_string(pid_.get()), errno);
  pid_.release();
  code = exit_code_of(status);
  return true;
}

Child spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw Error("spawn: empty command");
  const std::vector<char*> args = c_argv(spec.argv);
  SpawnAttributes sa;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  check_spawn(::posix_spawnattr_setsigmask(sa.attr(), &none), "signal mask");
  check_spawn(::posix_spawnattr_setsigdefault(sa.attr(), &all), "signal dispositions");
  check_spawn(::posix_spawnattr_setflags(sa.attr(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF), "flags");
  if (spec.null_stdin) {
    check_spawn(::posix_spawn_file_actions_addopen(sa.actions(), STDIN_FILENO, "/dev/null", O_RDONLY, 0), "stdin");
  } else if (spec.stdin_fd >= 0) {
    check_spawn(::posix_spawn_file_actions_adddup2(sa.actions(), spec.stdin_fd, STDIN_FILENO), "stdin");
  }
  if (spec.stdout_fd >= 0)
    check_spawn(::posix_spawn_file_actions_adddup2(sa.actions(), spec.stdout_fd, STDOUT_FILENO), "stdout");
  if (spec.stderr_fd >= 0)
    check_spawn(::posix_spawn_file_actions_adddup2(sa.actions(), spec.stderr_fd, STDERR_FILENO), "stderr");
  pid_t pid = -1;
  const int rc = spec.argv[0].find('/') == std::string::npos
                     ? ::posix_spawnp(&pid, args[0], sa.actions(), sa.attr(), args.data(), environ)
                     : ::posix_spawn(&pid, args[0], sa.actions(), sa.attr(), args.data(), environ);
  if (rc != 0)
    throw Error("cannot run " + spec.argv[0].substr(0, 200) + ": " + std::strerror(rc) +
                    (rc == ENOENT ? " (not found: install it, or check PATH)" : ""),
                rc);
  return Child(pid);
}

Child spawn(const std::vector<std::string>& argv) { return spawn(SpawnSpec{argv}); }

Captured run_capture(const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error("run: empty command");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw system_error("pipe", errno);
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw system_error("pipe", errno);
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  SpawnSpec spec{argv};
  spec.stdout_fd = out_w.get();
  spec.stderr_fd = err_w.get();
  spec.null_stdin = true;
  Child child = spawn(spec);
  out_w = UniqueFd();
  err_w = UniqueFd();
  Captured c;
  struct pollfd fds[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw system_error("poll", errno);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? c.out : c.err;
      std::size_t limit = i == 0 ? (4u << 20) : (64u << 10);
      if (dst.size() < limit) dst.append(buf, std::min<std::size_t>(static_cast<std::size_t>(n), limit - dst.size()));
    }
  }
  c.exit_code = child.wait();
  return c;
}

UniqueFd open_pidfd(int pid) {
  if (pid <= 0) {
    errno = ESRCH;
    return UniqueFd();
  }
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  errno = ENOSYS;
  return UniqueFd();
#endif
}

std::optional<std::filesystem::path> find_executable(const std::string& name,
                                                     const std::function<bool(const std::filesystem::path&)>& skip) {
  const auto usable = [&](const std::filesystem::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0 && !(skip && skip(p));
  };
  if (name.find('/') != std::string::npos) {
    if (usable(name)) return std::filesystem::path(name);
    return std::nullopt;
  }
  const char* env = std::getenv("PATH");
  std::stringstream dirs(env && *env ? env : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::filesystem::path p = std::filesystem::path(dir) / name;
    if (usable(p)) return p;
  }
  return std::nullopt;
}

}  // namespace gpurun
