#include "engine/measured_run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/process.hpp"
#include "base/temp_dir.hpp"
#include "oci/container.hpp"

namespace gpurun {
namespace {

volatile sig_atomic_t g_child = -1;
volatile sig_atomic_t g_signal = 0;

void forward_signal(int sig, siginfo_t* info, void*) {
  g_signal = sig;
  // si_code <= 0: sent by a process (kill, sigqueue). Terminal-generated signals (SI_KERNEL)
  // already went to the whole foreground process group, the engine included.
  if (info && info->si_code <= 0 && g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// Installs the forwarding handlers for its lifetime.
class SignalForwarder {
 public:
  SignalForwarder() {
    struct sigaction sa {};
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;
  ~SignalForwarder() {
    for (std::size_t i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    g_child = -1;
  }

 private:
  static constexpr std::size_t kCount = 3;
  static constexpr int kSignals[kCount] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[kCount] {};
};

double seconds_since(const struct timespec& start) {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec - start.tv_sec) + static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9;
}

void sleep_ms(long ms) {
  struct timespec ts {
    0, ms * 1000000
  };
  ::nanosleep(&ts, nullptr);
}

Child start_engine(const std::vector<std::string>& argv, const std::optional<fs::path>& output) {
  UniqueFd out;
  if (output) {
    out = UniqueFd(::open(output->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out) throw system_error("create " + output->string(), errno);
  }
  SpawnSpec spec{argv};
  if (out) {
    spec.stdout_fd = out.get();
    spec.stderr_fd = out.get();
    spec.null_stdin = true;
  }
  return spawn(spec);
}

std::string read_cid(const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "";
  char buf[256];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string id(buf, static_cast<std::size_t>(n));
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id.size() >= 12 ? id : "";
}

}  // namespace

std::vector<std::string> with_cidfile(const std::vector<std::string>& argv, const std::string& cidfile) {
  std::vector<std::string> out = argv;
  const std::size_t at = out.size() >= 2 ? 2 : out.size();
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), {"--cidfile", cidfile});
  return out;
}

std::optional<std::string> find_cidfile_option(const std::vector<std::string>& o) {
  std::optional<std::string> found;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (o[i] == "--cidfile" && i + 1 < o.size())
      found = o[++i];
    else if (o[i].rfind("--cidfile=", 0) == 0)
      found = o[i].substr(10);
  }
  return found;
}

bool detaches(const std::vector<std::string>& o) {
  for (const auto& a : o) {
    if (a == "--detach" || a == "--detach=true") return true;
    if (a.size() > 1 && a[0] == '-' && a[1] != '-') {
      // A short cluster: flags up to the first option that takes a value.
      for (std::size_t k = 1; k < a.size(); ++k) {
        if (a[k] == 'd') return true;
        if (!std::strchr("itPq", a[k])) break;
      }
    }
  }
  return false;
}

MeasuredRun run_measured(const std::vector<std::string>& argv, const std::string& engine, const MeasureOptions& o) {
  std::optional<TempDir> dir;
  fs::path cidfile;
  std::vector<std::string> full = argv;
  if (o.user_cidfile) {
    cidfile = *o.user_cidfile;
  } else {
    dir.emplace("gpu-run-measure");
    cidfile = dir->path() / "cid";
    full = with_cidfile(argv, cidfile.string());
  }

  MeasuredRun run;
  SignalForwarder forwarder;
  g_signal = 0;
  struct timespec start {};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  Child child = start_engine(full, o.output);
  g_child = child.pid();
  bool exited = false;
  auto engine_exited = [&] {
    if (!exited) exited = child.poll(run.exit_code);
    return exited;
  };

  // The engine writes the cidfile once the container is created (after any image pull).
  while (!engine_exited()) {
    run.container_id = read_cid(cidfile);
    if (!run.container_id.empty()) break;
    sleep_ms(10);
  }
  int pid = 0;
  // Created is not yet started: inspect until it runs (or has already come and gone).
  while (!run.container_id.empty() && !engine_exited()) {
    try {
      ContainerInfo info = inspect_container(engine, run.container_id);
      if (info.running && info.pid > 0) {
        pid = info.pid;
        break;
      }
    } catch (const Error&) {
      // Not known yet, or already removed (--rm): the loop ends when the engine does.
    }
    sleep_ms(20);
  }
  if (pid > 0) {
    run.container_seen = true;
    SamplerOptions so;
    so.interval = o.interval;
    so.stop = engine_exited;
    if (o.on_sample)
      so.on_sample = [&](const ShmUsage& u, const ShmSampleStats& s) { o.on_sample(pid, run.container_id, u, s); };
    try {
      run.shm = sample_shm_of_pid(pid, so);
    } catch (const Error& e) {
      // The job is not ours to stop: let it finish unmeasured.
      run.sample_error = e.what();
    }
  }
  if (!exited) run.exit_code = child.wait();
  g_child = -1;
  run.wall_seconds = seconds_since(start);
  run.interrupted_by = g_signal;
  return run;
}

}  // namespace gpurun
