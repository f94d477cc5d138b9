#include "doctor_log.hpp"

#include <algorithm>
#include <cctype>

#include "contract.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

constexpr std::size_t kMaxShownLine = 240;

bool contains(std::string_view line, std::string_view what) { return line.find(what) != std::string_view::npos; }

// The number after `key` in `line` ("(size 9637888)" -> 9637888), if any.
std::optional<std::uint64_t> number_after(std::string_view line, std::string_view key) {
  std::size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  at += key.size();
  std::uint64_t n = 0;
  std::size_t digits = 0;
  while (at < line.size() && std::isdigit(static_cast<unsigned char>(line[at])) && digits < 19) {
    n = n * 10 + static_cast<std::uint64_t>(line[at] - '0');
    ++at;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  return n;
}

std::string shown(std::string_view line) {
  std::string out;
  for (char c : line.substr(0, kMaxShownLine))
    out += (c == '\t' || std::isprint(static_cast<unsigned char>(c))) ? c : ' ';
  while (!out.empty() && out.back() == ' ') out.pop_back();
  std::size_t start = out.find_first_not_of(' ');
  out = start == std::string::npos ? "" : out.substr(start);
  if (line.size() > kMaxShownLine) out += "...";
  return out;
}

std::optional<CrashEvidence::Kind> classify(std::string_view line) {
  if (contains(line, "is killed by signal: Bus error")) return CrashEvidence::kWorkerKilledByBusError;
  if (contains(line, "Unexpected bus error encountered in worker")) return CrashEvidence::kBusErrorInWorker;
  if (contains(line, "unable to allocate shared memory(shm)")) return CrashEvidence::kTorchShmAllocate;
  if (contains(line, "unable to write to file </torch_") && contains(line, "No space left on device"))
    return CrashEvidence::kTorchShmNoSpace;
  if (contains(line, "shared memory segment /dev/shm/nccl-") && contains(line, "while creating"))
    return CrashEvidence::kNcclSegment;
  if (contains(line, "failed to extend /dev/shm/nccl-")) return CrashEvidence::kNcclSegment;
  if (contains(line, "exited unexpectedly") && contains(line, "DataLoader worker"))
    return CrashEvidence::kWorkersExited;
  for (std::string_view status : {"exit status 135", "exit status: 135", "exit code 135", "exit code: 135",
                                  "exited with code 135", "status 135", "Bus error (core dumped)"})
    if (contains(line, status)) return CrashEvidence::kSigbusExit;
  return std::nullopt;
}

bool has(const CrashFacts& f, CrashEvidence::Kind kind) {
  return std::any_of(f.evidence.begin(), f.evidence.end(), [&](const CrashEvidence& e) { return e.kind == kind; });
}

const CrashEvidence* first(const CrashFacts& f, CrashEvidence::Kind kind) {
  for (const CrashEvidence& e : f.evidence)
    if (e.kind == kind) return &e;
  return nullptr;
}

std::string where(const CrashEvidence& e) { return "line " + std::to_string(e.line) + ": \"" + e.text + "\""; }

// True when gpu-run sized the container: it recorded the profile and the size it applied.
bool sized_by_gpu_run(const CrashFacts& f) { return f.profile && f.planned_shm; }

std::string had(const CrashFacts& f) {
  if (sized_by_gpu_run(f))
    return " gpu-run sized this container: its plan for profile " + *f.profile + " (" +
           (f.gpus ? *f.gpus + " GPU(s), " : "") + f.workers.value_or("?") + " workers x batch " +
           f.batch_size.value_or("?") + " per rank) of " + format_size(*f.planned_shm) +
           " was applied and was too small for what the job wrote.";
  return f.shm_size ? " The container's /dev/shm was " + format_size(*f.shm_size) +
                          (*f.shm_size == 64 * kMiB ? " (Docker's default)." : ".")
                    : "";
}

// The sizing flags of the job: those gpu-run recorded, placeholders for the others.
std::string job_flags(const CrashFacts& f) {
  return "--profile " + f.profile.value_or("NAME") + " --gpus " + f.gpus.value_or("N") + " --workers " +
         f.workers.value_or("W") + " --batch-size " + f.batch_size.value_or("B");
}

// The command that sizes /dev/shm for the job.
std::string sizing_fix(const CrashFacts& f) {
  if (sized_by_gpu_run(f))
    return "the same command would get the same size: rerun with --guard, which grows /dev/shm before it fills "
           "(gpu-run --guard " +
           job_flags(f) +
           " IMAGE ...), or measure the job once and size it from the measurement (gpu-run-ctl "
           "calibrate --out-profile NAME " +
           job_flags(f) + " -- IMAGE COMMAND..., then gpu-run --profile NAME ...)";
  const std::string profile = f.profile.value_or("NAME");
  return "rerun sized for the job: gpu-run " + job_flags(f) + " IMAGE ... (gpu-run-ctl plan --profile " + profile +
         " --gpus " + f.gpus.value_or("N") +
         " prints the size first; --record measures the peak), or give the engine --shm-size at least that";
}

}  // namespace

void read_crash_log(std::string_view text, CrashFacts& f) {
  std::size_t number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    const auto kind = classify(line);
    if (!kind) continue;
    CrashEvidence e{*kind, number, shown(line), std::nullopt};
    if (*kind == CrashEvidence::kNcclSegment) {
      e.bytes = number_after(line, "(size ");
      if (!e.bytes) {
        const auto to = line.find(" to ", line.find("failed to extend"));
        if (to != std::string_view::npos) e.bytes = number_after(line.substr(to), " to ");
      }
    }
    const bool seen = std::any_of(f.evidence.begin(), f.evidence.end(),
                                  [&](const CrashEvidence& x) { return x.kind == e.kind && x.text == e.text; });
    if (!seen) f.evidence.push_back(std::move(e));
  }
  f.lines += number;
}

std::vector<Finding> diagnose_crash(const CrashFacts& f) {
  std::vector<Finding> out;
  const CrashEvidence* killed = first(f, CrashEvidence::kWorkerKilledByBusError);
  const CrashEvidence* bus = first(f, CrashEvidence::kBusErrorInWorker);
  if (killed || bus) {
    out.push_back({Level::kFail, "dataloader-bus-error",
                   "a DataLoader worker died of a bus error (" + where(killed ? *killed : *bus) +
                       "): each worker writes the batches it collates into /dev/shm, and a write to a full "
                       "tmpfs is SIGBUS, not an error PyTorch can catch." +
                       had(f),
                   sizing_fix(f)});
  }
  for (CrashEvidence::Kind kind : {CrashEvidence::kTorchShmNoSpace, CrashEvidence::kTorchShmAllocate}) {
    if (const CrashEvidence* e = first(f, kind))
      out.push_back({Level::kFail, "torch-shm-no-space",
                     "PyTorch could not allocate a shared-memory segment in /dev/shm (" + where(*e) +
                         "): it was full when a worker or torch.multiprocessing shared a tensor." + had(f),
                     sizing_fix(f)});
  }
  if (has(f, CrashEvidence::kNcclSegment)) {
    // "(size N)" is the segment; "failed to extend ... to N bytes" counts a 4-byte header on top.
    std::uint64_t largest = 0, extended = 0;
    std::vector<std::string> segments;
    for (const CrashEvidence& e : f.evidence) {
      if (e.kind != CrashEvidence::kNcclSegment) continue;
      const bool creating = e.text.find("(size ") != std::string::npos;
      if (e.bytes) (creating ? largest : extended) = std::max(creating ? largest : extended, *e.bytes);
      const std::size_t at = e.text.find("/dev/shm/nccl-");  // past the shown part of a very long line: npos
      const std::string name =
          at == std::string::npos ? e.text : e.text.substr(at, e.text.find_first_of(" ,)", at) - at);
      if (std::find(segments.begin(), segments.end(), name) == segments.end()) segments.push_back(name);
    }
    if (!largest) largest = extended;
    const CrashEvidence& e = *first(f, CrashEvidence::kNcclSegment);
    std::string numbers =
        largest ? " NCCL asked for " + format_size(largest) + " per segment (" + std::to_string(largest) +
                      " bytes); its SHM transport creates one per peer it cannot reach by P2P, in every rank" +
                      (segments.size() > 1 ? " (" + std::to_string(segments.size()) + " failed in this log)" : "") + "."
                : "";
    out.push_back({Level::kFail, "nccl-shm",
                   "NCCL could not create its shared-memory segment in /dev/shm (" + where(e) + ")." + numbers + had(f),
                   "give /dev/shm room for NCCL on top of the DataLoader: gpu-run --profile " +
                       f.profile.value_or("NAME") + " --gpus " + f.gpus.value_or("N") +
                       " ... counts NCCL's segments for more than one rank (the profile's nccl section: transport, "
                       "channels); or set "
                       "NCCL_SHM_DISABLE=1 (NCCL then uses P2P or sockets: slower between GPUs without NVLink)"});
  }
  const bool sigbus_exit = (f.exit_code && *f.exit_code == 135) || has(f, CrashEvidence::kSigbusExit);
  if (sigbus_exit && out.empty()) {
    const CrashEvidence* e = first(f, CrashEvidence::kSigbusExit);
    out.push_back({Level::kFail, "sigbus-exit",
                   std::string("the job exited with status 135 (128 + SIGBUS, a bus error)") +
                       (e ? " (" + where(*e) + ")" : "") +
                       ": in a training job that is most often a write to a full /dev/shm (the main process "
                       "sharing a tensor, or the DataLoader with num_workers=0 pinning into it)." +
                       had(f),
                   sizing_fix(f)});
  }
  if (out.empty()) {
    if (const CrashEvidence* e = first(f, CrashEvidence::kWorkersExited)) {
      out.push_back({Level::kWarn, "dataloader-exited",
                     "DataLoader workers exited unexpectedly (" + where(*e) +
                         "), and the log shows no bus error or /dev/shm allocation failure: the kernel's OOM "
                         "killer is the other usual cause (dmesg, or `docker inspect` OOMKilled)",
                     "if they were OOM-killed, raise the memory limit (a full /dev/shm counts against it too); "
                     "otherwise the worker's own traceback above says why"});
    } else {
      out.push_back({Level::kOk, "crash-log",
                     "no /dev/shm failure recognised in " + std::to_string(f.lines) + " line" +
                         (f.lines == 1 ? "" : "s") +
                         (f.exit_code ? " (exit status " + std::to_string(*f.exit_code) + ")" : "") +
                         ": no DataLoader bus error, no PyTorch or NCCL shared-memory allocation failure",
                     ""});
    }
  }
  return out;
}

}  // namespace gpurun
