#include "ctl/doctor/crash_matchers.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "base/enum_name.hpp"

namespace gpurun {
namespace crash_match {
namespace {

using Match = std::optional<CrashLine>;

bool contains(std::string_view line, std::string_view what) { return line.find(what) != std::string_view::npos; }

bool contains_any(std::string_view line, std::initializer_list<std::string_view> whats) {
  return std::any_of(whats.begin(), whats.end(), [&](std::string_view w) { return contains(line, w); });
}

bool contains_nocase(std::string_view line, std::string_view what) {
  return std::search(line.begin(), line.end(), what.begin(), what.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != line.end();
}

// The digits at `at` (at most 19: no overflow), if any.
std::optional<std::uint64_t> digits_at(std::string_view line, std::size_t at) {
  std::uint64_t n = 0;
  std::size_t count = 0;
  while (at < line.size() && std::isdigit(static_cast<unsigned char>(line[at])) && count < 19) {
    n = n * 10 + static_cast<std::uint64_t>(line[at] - '0');
    ++at;
    ++count;
  }
  if (count == 0) return std::nullopt;
  return n;
}

// The number right after `key` ("(size 9637888)" with key "(size " -> 9637888).
std::optional<std::uint64_t> number_after(std::string_view line, std::string_view key) {
  const std::size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  return digits_at(line, at + key.size());
}

// A decimal number of gigabytes (10^9, as Ray prints them) right after `key`, in bytes.
std::optional<std::uint64_t> gigabytes_after(std::string_view line, std::string_view key) {
  std::size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  at += key.size();
  const auto whole = digits_at(line, at);
  if (!whole || *whole > 1000000000) return std::nullopt;
  while (at < line.size() && std::isdigit(static_cast<unsigned char>(line[at]))) ++at;
  std::uint64_t bytes = *whole * 1000000000ull;
  if (at < line.size() && line[at] == '.') {
    std::uint64_t scale = 100000000ull;
    for (++at; at < line.size() && std::isdigit(static_cast<unsigned char>(line[at])) && scale; ++at, scale /= 10)
      bytes += static_cast<std::uint64_t>(line[at] - '0') * scale;
  }
  return bytes;
}

// The text after `key` up to the end, trimmed of spaces, quotes and a closing ';' or '.'.
std::string rest_after(std::string_view line, std::string_view key) {
  const std::size_t at = line.find(key);
  if (at == std::string_view::npos) return "";
  std::string_view rest = line.substr(at + key.size());
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == ';' || rest.back() == '`' || rest.back() == '"' ||
                           rest.back() == '.' || rest.back() == '\t' || rest.back() == '|'))
    rest.remove_suffix(1);
  return std::string(rest.substr(0, 120));
}

Match line_of(CrashLine::Kind kind) {
  CrashLine m;
  m.kind = kind;
  return m;
}

// --- PyTorch: the DataLoader and shared tensors ---

Match match_dataloader(std::string_view line) {
  if (contains(line, "is killed by signal: Bus error")) return line_of(CrashLine::kWorkerKilledByBusError);
  if (contains_nocase(line, "bus error encountered in worker")) return line_of(CrashLine::kBusErrorInWorker);
  if (contains(line, "DataLoader worker") && contains(line, "exited unexpectedly"))
    return line_of(CrashLine::kWorkersExited);
  return std::nullopt;
}

Match match_torch_shm(std::string_view line) {
  if (contains(line, "unable to allocate shared memory(shm)")) return line_of(CrashLine::kTorchShmAllocate);
  // PyTorch 1.x prints no errno; later ones ": No space left on device (28)".
  if (contains(line, "unable to write to file </torch_")) return line_of(CrashLine::kTorchShmNoSpace);
  if (contains(line, "unable to mmap") && contains(line, "</torch_") && contains(line, "Cannot allocate memory")) {
    Match m = line_of(CrashLine::kTorchMmapNoMemory);
    m->bytes = number_after(line, "unable to mmap ");
    return m;
  }
  return std::nullopt;
}

// --- NCCL ---

Match match_nccl_shm(std::string_view line) {
  if (contains(line, "Error while attaching to shared memory segment")) {
    Match m = line_of(CrashLine::kNcclShmAttach);
    m->bytes = number_after(line, "(size ");
    m->detail = rest_after(line, "error: ");
    return m;
  }
  if (contains(line, "Error while creating shared memory segment")) {
    Match m = line_of(CrashLine::kNcclSegment);
    m->bytes = number_after(line, "(size ");
    return m;
  }
  // "failed to extend /dev/shm/nccl-X to N bytes" counts a 4-byte header on top of the segment.
  if (contains(line, "failed to extend /dev/shm/nccl-")) {
    Match m = line_of(CrashLine::kNcclSegment);
    const std::size_t to = line.find(" to ", line.find("failed to extend"));
    if (to != std::string_view::npos) m->bytes = digits_at(line, to + 4);
    m->detail = "extend";
    return m;
  }
  // NCCL before 2.12: include/shm.h:28, with no segment name on the line.
  if (contains(line, "Call to posix_fallocate failed") && contains(line, "No space left on device"))
    return line_of(CrashLine::kNcclSegment);
  return std::nullopt;
}

Match match_nccl_timeout(std::string_view line) {
  if (contains_any(line,
                   {"Watchdog caught collective operation timeout", "NCCL timeout", "NCCL communicator was aborted"}))
    return line_of(CrashLine::kNcclTimeout);
  return std::nullopt;
}

// ncclGetErrorString(ncclSystemError) in every release; 2.18.1 appends "(run with NCCL_DEBUG=INFO
// for details)". Which call failed is only in a WARN line, printed when NCCL_DEBUG is set.
Match match_nccl_system_error(std::string_view line) {
  if (contains(line, "unhandled system error")) return line_of(CrashLine::kNcclSystemError);
  return std::nullopt;
}

Match match_nccl_network(std::string_view line) {
  const bool nccl = contains(line, "NCCL WARN");
  if (nccl && contains_any(line, {"Connection reset by peer", "Connection closed by remote peer", "Connection refused",
                                  "NET/IB : Got completion", "Software caused connection abort", "Broken pipe"}))
    return line_of(CrashLine::kNcclNetwork);
  if (contains(line, "RuntimeError: Connection reset by peer")) return line_of(CrashLine::kNcclNetwork);
  return std::nullopt;
}

// --- vLLM: the shared-memory MessageQueue ---

Match match_vllm(std::string_view line) {
  if (contains(line, "Insufficient space in /dev/shm")) {
    Match m = line_of(CrashLine::kVllmShmInsufficient);
    if (const auto mib = number_after(line, "Insufficient space in /dev/shm: ")) m->bytes = *mib << 20;
    if (const auto mib = number_after(line, "required, ")) m->available = *mib << 20;
    return m;
  }
  if (contains(line, "No available shared memory broadcast block found in")) {
    Match m = line_of(CrashLine::kVllmMqStalled);
    if (const auto s = number_after(line, "block found in ")) m->detail = std::to_string(*s) + " seconds";
    return m;
  }
  return std::nullopt;
}

// --- Ray's object store (plasma) ---

Match match_ray(std::string_view line) {
  // The directory is /tmp up to 0.8, the user's temp directory after, /tmp/ray in recent releases.
  const std::size_t using_at = line.find("object store is using ");
  if (using_at != std::string_view::npos && line.find(" instead of /dev/shm", using_at) != std::string_view::npos) {
    Match m = line_of(CrashLine::kRayStoreOnTmp);
    m->available = number_after(line, "/dev/shm has only ");
    m->detail = rest_after(line, "'--shm-size=");
    if (const std::size_t quote = m->detail.find('\''); quote != std::string::npos) m->detail.resize(quote);
    return m;
  }
  // Ray 0.1 to 0.5 (python/ray/services.py): the store shrunk to 80% of what /dev/shm had.
  if (contains(line, "Reducing object store memory because /dev/shm has only")) {
    Match m = line_of(CrashLine::kRayStoreShrunk);
    m->available = number_after(line, "/dev/shm has only ");
    return m;
  }
  if (contains(line, "System memory request exceeds memory available in /dev/shm")) {
    Match m = line_of(CrashLine::kRayStoreTooBig);
    m->bytes = number_after(line, "The request is for ");
    m->available = number_after(line, "the amount available is ");
    return m;
  }
  if (contains(line, "The configured object store size (") && contains(line, "exceeds /dev/shm size (")) {
    Match m = line_of(CrashLine::kRayStoreTooBig);
    m->bytes = gigabytes_after(line, "The configured object store size (");
    m->available = gigabytes_after(line, "exceeds /dev/shm size (");
    return m;
  }
  return std::nullopt;
}

// --- Triton's python backend: a shared-memory region per model instance ---

// Its wordings since r21.05 (src/shm_manager.cc, src/python.cc): "unable to initialize shared-memory
// key 'K' to requested size: N bytes" (April 2021), "Unable to initialize shared memory key 'K' to
// requested size (N bytes)" after; "Failed to increase the shared memory pool size for key 'K' to N
// bytes", without the key since June 2025; "Failed to initialize the model instance M because it run
// out of shared memory" (spring 2021). "Error: E" follows from June 2021 on.
Match match_triton(std::string_view line) {
  const bool init = contains_nocase(line, "to initialize shared memory key") ||
                    contains_nocase(line, "to initialize shared-memory key");
  const bool grow = contains(line, "Failed to increase the shared memory pool size");
  const bool instance = contains(line, "because it run out of shared memory");
  if (!init && !grow && !instance) return std::nullopt;
  Match m = line_of(CrashLine::kTritonShm);
  if (init) {
    m->bytes = number_after(line, "to requested size (");
    if (!m->bytes) m->bytes = number_after(line, "to requested size: ");
  } else if (grow) {
    m->bytes = number_after(line, "' to ");
    if (!m->bytes) m->bytes = number_after(line, "pool size to ");
  }
  m->detail = rest_after(line, "Error: ");
  if (instance || contains(line, "no bytes available in /dev/shm")) m->detail = "out of shared memory";
  if (grow) m->detail = "grow: " + m->detail;
  return m;
}

// --- Exit statuses and signals: the launchers' reports of a process that died ---

// The signal an exit status in `line` reports: "exitcode: -7", "exitcode  : -11", "return code = -9",
// "exits with return -7", "exit code: -7" (negative: killed by that signal), "exit status 135",
// "exit code 137" (128 + the signal).
std::optional<int> exit_signal(std::string_view line) {
  for (std::string_view key :
       {"exitcode", "exit code", "return code", "exits with return", "exit status", "exited with code", "status"}) {
    for (std::size_t at = line.find(key); at != std::string_view::npos; at = line.find(key, at + 1)) {
      std::size_t i = at + key.size();
      while (i < line.size() && (line[i] == ' ' || line[i] == ':' || line[i] == '=')) ++i;
      const bool negative = i < line.size() && line[i] == '-';
      const auto n = digits_at(line, i + (negative ? 1 : 0));
      if (!n) continue;
      if (negative && *n > 0 && *n < 65) return static_cast<int>(*n);
      if (!negative && (*n == 135 || *n == 137 || *n == 139)) return static_cast<int>(*n - 128);
    }
  }
  return std::nullopt;
}

Match match_signal(std::string_view line) {
  // Stack dumpers: UCX's "Caught signal 7 (Bus error: nonexistent physical address)", glog's
  // "*** SIGBUS (@0x7f...) received by PID N", absl's "*** SIGBUS received at time=", gdb's.
  if (contains_any(line,
                   {"Signal 7 (SIGBUS)", "SIGBUS received", "Bus error (core dumped)", "Fatal Python error: Bus error",
                    "Caught signal 7 (Bus error", "*** SIGBUS (@0x", "received signal SIGBUS"}))
    return line_of(CrashLine::kSigbusExit);
  if (contains_any(line, {"is killed by signal: Killed", "Signal 9 (SIGKILL)", "signal 9:SIGKILL",
                          "Out of memory: Killed process", "OOMKilled"}))
    return line_of(CrashLine::kOomKilled);
  if (contains_any(line, {"killed by signal: Segmentation fault", "Signal 11 (SIGSEGV)",
                          "Segmentation fault (core dumped)", "Fatal Python error: Segmentation fault"}))
    return line_of(CrashLine::kSegfault);
  switch (exit_signal(line).value_or(0)) {
    case 7:
      return line_of(CrashLine::kSigbusExit);
    case 9:
      return line_of(CrashLine::kOomKilled);
    case 11:
      return line_of(CrashLine::kSegfault);
    default:
      return std::nullopt;
  }
}

// --- Look-alikes that are not /dev/shm ---

Match match_fd_limit(std::string_view line) {
  if (contains_any(line, {"items of ancdata", "Too many open files", "[Errno 24]"}))
    return line_of(CrashLine::kFdLimit);
  return std::nullopt;
}

Match match_cuda(std::string_view line) {
  if (contains_any(line, {"CUDA error: ", "CUDA out of memory"})) return line_of(CrashLine::kCudaError);
  return std::nullopt;
}

Match match_disk_full(std::string_view line) {
  if (!contains_any(line, {"No space left on device", "[Errno 28]", "StorageFull",
                           "PytorchStreamWriter failed writing file", "Disk quota exceeded"}))
    return std::nullopt;
  // A write into /dev/shm by a program no matcher above knows (joblib, a hand-made segment).
  if (contains(line, "/dev/shm/")) return line_of(CrashLine::kShmWriteNoSpace);
  // Whatever names shared memory belongs to the matchers above.
  if (contains_any(line, {"torch_", "nccl", "shared memory", "posix_fallocate"})) return std::nullopt;
  return line_of(CrashLine::kDiskFull);
}

// In order: a line that says more is read by the matcher that says most (Triton's and NCCL's
// lines end in "No space left on device", which alone is a disk).
constexpr Match (*kMatchers[])(std::string_view) = {
    match_vllm,
    match_ray,
    match_triton,
    match_nccl_shm,
    match_torch_shm,
    match_dataloader,
    match_fd_limit,
    match_nccl_timeout,
    match_nccl_network,
    match_cuda,
    match_signal,
    match_disk_full,
    match_nccl_system_error,
};

}  // namespace
}  // namespace crash_match

std::optional<CrashLine> match_crash_line(std::string_view text) {
  for (auto matcher : crash_match::kMatchers)
    if (crash_match::Match m = matcher(text)) return m;
  return std::nullopt;
}

const char* crash_kind_name(CrashLine::Kind kind) {
  static const char* const kNames[] = {"worker-killed-by-bus-error",
                                       "bus-error-in-worker",
                                       "torch-shm-no-space",
                                       "torch-shm-allocate",
                                       "nccl-segment",
                                       "sigbus-exit",
                                       "workers-exited",
                                       "vllm-shm-insufficient",
                                       "vllm-mq-stalled",
                                       "ray-store-on-tmp",
                                       "ray-store-too-big",
                                       "ray-store-shrunk",
                                       "triton-shm",
                                       "nccl-shm-attach",
                                       "fd-limit",
                                       "oom-killed",
                                       "segfault",
                                       "cuda-error",
                                       "nccl-timeout",
                                       "nccl-network",
                                       "disk-full",
                                       "torch-mmap-no-memory",
                                       "shm-write-no-space",
                                       "nccl-system-error"};
  return enum_name(kind, kNames);
}

void note_engines(std::string_view text, std::vector<std::string>& engines) {
  const auto note = [&](const char* name) {
    if (std::find(engines.begin(), engines.end(), name) == engines.end()) engines.push_back(name);
  };
  if (crash_match::contains_nocase(text, "vllm") ||
      crash_match::contains_any(text, {"EngineCore", "shm_broadcast", "RayWorker"}))
    note("vLLM");
  if (crash_match::contains_any(
          text, {"(raylet)", "raylet", "services.py", "ray.init", "RayTask", "ray/_private", "object store"}))
    note("Ray");
  if (crash_match::contains_any(
          text, {"triton_python_backend", "tritonserver", "TRITONBACKEND", "tritonclient", "Python backend"}))
    note("Triton");
  if (crash_match::contains_nocase(text, "deepspeed") || crash_match::contains(text, "sigkill_handler"))
    note("DeepSpeed");
  if (crash_match::contains_any(text, {"torch.distributed.elastic", "ChildFailedError", "torchrun"})) note("torchrun");
  if (crash_match::contains_nocase(text, "sglang") || crash_match::contains(text, "scheduler died")) note("SGLang");
}

}  // namespace gpurun
