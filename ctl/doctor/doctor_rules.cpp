#include "ctl/doctor/doctor_rules.hpp"

#include <algorithm>
#include <optional>

#include "base/enum_name.hpp"
#include "base/error.hpp"
#include "base/units.hpp"
#include "ctl/doctor/doctor_log.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "decision/growth_limits.hpp"
#include "decision/sizing.hpp"

namespace gpurun {
namespace {

// Docker's default /dev/shm, and podman's (65536000 bytes: "64000k" in podman 4).
constexpr std::uint64_t kDockerDefaultShm = 64 * kMiB;
constexpr std::uint64_t kPodmanDefaultShm = 64000 * kKiB;
constexpr unsigned kUseWarnPercent = 80;
constexpr unsigned kUseFailPercent = 95;
constexpr std::size_t kNamesShown = 5;

const char* const kSizeFix =
    "restart the container sized for the job: gpu-run --profile NAME [--gpus N] IMAGE ... "
    "(`gpu-run-ctl plan` shows the size) or --shm-size SIZE; in Kubernetes an emptyDir of medium "
    "Memory at /dev/shm (`gpu-run-ctl k8s -f`). Raising kernel.shmmax or kernel.shmall does not help: "
    "they limit System V shmget segments, not /dev/shm";

unsigned percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return 0;
  return static_cast<unsigned>((static_cast<long double>(part) * 100) / static_cast<long double>(whole));
}

std::optional<std::string> env_of(const DoctorFacts& f, const std::string& name) {
  auto it = f.env.find(name);
  if (it == f.env.end()) return std::nullopt;
  return it->second;
}

// "GPU_RUN_SHM_SIZE=2g"
std::string assignment(const std::string& name, const std::string& value) { return name + "=" + value; }

// How to plan for `n` workers, in the words of the door that sized the container.
std::string workers_fix(std::uint64_t n, const std::string& door) {
  const std::string count = std::to_string(n);
  const std::string read = std::string(", or make the script read ") + request_key(RequestKey::kWorkers).env +
                           " (it holds the workers planned)";
  if (door == "gpu-run-webhook" || door == "gpu-run-ctl k8s")
    return "plan for " + count + ": annotate the pod " + request_key(RequestKey::kWorkers).annotation + ": \"" + count +
           "\"" + read;
  if (door == "gpu-run-runtime" || door == "gpu-run-hook")
    return "plan for " + count + ": start it with -e " + request_key(RequestKey::kWorkers).env + "=" + count + read;
  return "plan for " + count + ": rerun with gpu-run --workers " + count + read;
}

bool ipc_is(const DoctorFacts& f, IpcKind kind) { return f.ipc && f.ipc->kind == kind; }

bool host_shm(const DoctorFacts& f) { return ipc_is(f, IpcKind::kHost) || f.shm_is_host.value_or(false); }

bool has_shm(const DoctorFacts& f) { return f.shm_mount == ShmMount::kTmpfs || f.shm_mount == ShmMount::kNotTmpfs; }

// "torch_1_2 (1MiB), torch_3_4 (2MiB) and 3 more"
std::string list_files(const std::vector<ShmFile>& files) {
  std::string out;
  for (std::size_t i = 0; i < files.size() && i < kNamesShown; ++i) {
    if (i) out += ", ";
    out += files[i].name + " (" + format_size(files[i].bytes) + ")";
  }
  if (files.size() > kNamesShown) out += " and " + std::to_string(files.size() - kNamesShown) + " more";
  return out;
}

std::uint64_t total_bytes(const std::vector<ShmFile>& files) {
  std::uint64_t sum = 0;
  for (const auto& f : files) sum += f.bytes;
  return sum;
}

void add(std::vector<Finding>& out, Level level, const char* check, std::string message, std::string fix = "") {
  out.push_back(Finding{level, check, std::move(message), std::move(fix)});
}

void check_mount(const DoctorFacts& f, std::vector<Finding>& out) {
  const std::string why = ipc_is(f, IpcKind::kNone) ? " (ipc mode none)" : "";
  const std::string fix =
      "restart it without --ipc=none, sized for the job: gpu-run --profile NAME IMAGE ... (or "
      "--shm-size SIZE)";
  switch (f.shm_mount) {
    case ShmMount::kMissing:
      add(out, Level::kFail, "shm-mount",
          "there is no /dev/shm" + why + ": DataLoader workers and NCCL cannot share memory", fix);
      break;
    case ShmMount::kNotMount:
      add(out, Level::kFail, "shm-mount",
          "/dev/shm is a plain directory of /dev, not a tmpfs of its own" + why + ": it has only /dev's " +
              format_size(f.shm_size),
          fix);
      break;
    case ShmMount::kNotTmpfs:
      add(out, Level::kWarn, "shm-mount",
          "/dev/shm is a mount but not a tmpfs (a disk directory bound in?): shared tensors go to "
          "that filesystem",
          "drop the bind mount on /dev/shm and size a tmpfs for the job: gpu-run --profile NAME "
          "IMAGE ...");
      break;
    case ShmMount::kTmpfs:
      break;
  }
}

void check_ipc(const DoctorFacts& f, std::vector<Finding>& out) {
  if (ipc_is(f, IpcKind::kHost)) {
    add(out, Level::kWarn, "ipc",
        std::string(f.from_host ? "ipc mode host"
                                : "this process is in the host's IPC namespace (--ipc=host, or not "
                                  "in a container)") +
            ": /dev/shm is the host's, shared with every process there; gpu-run's sizing does not "
            "apply and "
            "segments are visible across containers",
        "start the container without --ipc=host: gpu-run --profile NAME IMAGE ... gives it a "
        "private /dev/shm "
        "of the planned size");
    return;
  }
  if (f.shm_is_host.value_or(false)) {
    add(out, Level::kWarn, "ipc",
        "/dev/shm is the host's (the same device as the host's /dev/shm: -v /dev/shm:/dev/shm, or "
        "--ipc=host): "
        "shared with every process there; gpu-run's sizing does not apply",
        "remove the /dev/shm bind mount (or --ipc=host) and start it with gpu-run --profile NAME "
        "IMAGE ...");
    return;
  }
  if (ipc_is(f, IpcKind::kNone)) return;  // check_mount reports the missing /dev/shm
  if (ipc_is(f, IpcKind::kJoined)) {
    add(out, Level::kOk, "ipc",
        "shares " + f.ipc->owner + "'s IPC namespace and /dev/shm: that container's size is what counts");
  } else if (!f.ipc) {
    add(out, Level::kOk, "ipc",
        f.from_host ? "ipc mode not reported by " + f.engine + "; /dev/shm is not the host's"
                    : "own IPC namespace (private, shareable or another container's): /dev/shm is "
                      "not the host's");
  } else {
    add(out, Level::kOk, "ipc", "ipc mode " + ipc_mode_name(*f.ipc) + ": a /dev/shm of its own, not the host's");
  }
}

void check_size(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  const std::string size = format_size(f.shm_size);
  const std::string kind = f.shm_mount == ShmMount::kTmpfs ? "tmpfs" : "not a tmpfs";
  const std::string dies = ": a DataLoader with workers dies with \"bus error\" once its batches in flight pass it";
  if (f.shm_size == kDockerDefaultShm) {
    add(out, Level::kFail, "shm-size", "/dev/shm is 64MiB, Docker's default for every container" + dies, kSizeFix);
  } else if (f.shm_size == kPodmanDefaultShm) {
    add(out, Level::kFail, "shm-size", "/dev/shm is 62.5MiB (64000KiB), podman's default for every container" + dies,
        kSizeFix);
  } else if (f.shm_size < kDockerDefaultShm) {
    add(out, Level::kFail, "shm-size", "/dev/shm is " + size + ", at or below the engines' defaults" + dies, kSizeFix);
  } else {
    add(out, Level::kOk, "shm-size",
        "/dev/shm is " + size + " (" + kind + (host_shm(f) ? ", the host's" : "") +
            "), above the engines' 64MiB default");
  }
}

void check_sizing(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  const auto asked = env_of(f, kEnvShmSize);
  const auto profile = env_of(f, kEnvProfile);
  const std::string how =
      "the container did not start through gpu-run, gpu-run-runtime (docker run --runtime gpu-run) "
      "or "
      "gpu-run-hook, or the engine replaced the size";
  if (asked) {
    std::uint64_t bytes = 0;
    try {
      bytes = parse_size(*asked, kEnvShmSize);
    } catch (const Error& e) {
      add(out, Level::kWarn, "sizing", assignment(kEnvShmSize, *asked) + " is not a size: " + e.what(),
          "set it to a size such as 2g, or let gpu-run set it (gpu-run --profile NAME)");
      return;
    }
    if (host_shm(f)) {
      add(out, f.shm_size >= bytes ? Level::kOk : Level::kFail, "sizing",
          assignment(kEnvShmSize, *asked) + " asks for " + format_size(bytes) + "; the host's /dev/shm is " +
              format_size(f.shm_size) + " and gpu-run never resizes it",
          f.shm_size >= bytes ? "" : "start it without --ipc=host or the /dev/shm bind, with gpu-run --profile NAME");
    } else if (f.shm_size >= bytes) {
      add(out, Level::kOk, "sizing",
          assignment(kEnvShmSize, *asked) + " asked for " + format_size(bytes) + " and /dev/shm has " +
              format_size(f.shm_size) + ": the size was applied");
    } else {
      add(out, Level::kFail, "sizing",
          assignment(kEnvShmSize, *asked) + " asked for " + format_size(bytes) + " but /dev/shm has " +
              format_size(f.shm_size) + ": " + how,
          "start it with gpu-run (which passes --shm-size), or register gpu-run-runtime "
          "(gpu-run-ctl configure "
          "docker) or the hook (gpu-run-ctl configure podman) and start it through them");
    }
    return;
  }
  if (profile) {
    if (f.shm_size <= kDockerDefaultShm && !host_shm(f)) {
      add(out, Level::kFail, "sizing",
          assignment(kEnvProfile, *profile) + " asks gpu-run's runtime or hook to size /dev/shm, but it still has " +
              format_size(f.shm_size) + ": " + how,
          "start it with docker run --runtime gpu-run (after gpu-run-ctl configure docker), through the podman "
          "hook (gpu-run-ctl configure podman, with --annotation " +
              assignment(request_key(RequestKey::kProfile).annotation, "NAME") + "), or with gpu-run");
    } else {
      add(out, Level::kOk, "sizing",
          assignment(kEnvProfile, *profile) + " and /dev/shm has " + format_size(f.shm_size));
    }
  }
}

void check_use(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f) || f.shm_size == 0) return;
  const unsigned pct = percent(f.shm_used, f.shm_size);
  const std::string numbers =
      format_size(f.shm_used) + " of " + format_size(f.shm_size) + " used (" + std::to_string(pct) + "%)";
  const std::string fix =
      "a larger /dev/shm for the job (gpu-run --profile NAME with its real batch size and workers; "
      "`gpu-run-ctl plan` shows the need), fewer DataLoader workers or a smaller batch; remove "
      "leftover segments";
  if (pct >= kUseFailPercent) {
    add(out, Level::kFail, "shm-use",
        numbers + ": the next batch a worker writes there dies with SIGBUS (\"bus error\"), not ENOSPC", fix);
  } else if (pct > kUseWarnPercent) {
    add(out, Level::kWarn, "shm-use", numbers + ": little room left for batches in flight", fix);
  } else {
    add(out, Level::kOk, "shm-use", numbers);
  }
}

void check_memory(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  if (!f.memory_limit) {
    add(out, Level::kOk, "memory", "no memory limit: /dev/shm pages count against the host's memory like any other");
    return;
  }
  const MemoryBudget budget{*f.memory_limit, f.memory_fraction_max};
  const std::string shm = format_size(f.shm_size), lim = format_size(budget.limit);
  const std::string share = std::to_string(percent(f.shm_size, budget.limit)) + "% of the memory limit " + lim;
  const std::string fix = "raise the memory limit to at least " + engine_size(budget.limit_for(f.shm_size)) +
                          " (--memory), or size /dev/shm for the job instead of generously (gpu-run --profile NAME)";
  if (f.shm_size > budget.limit) {
    add(out, Level::kWarn, "memory",
        "/dev/shm " + shm + " is larger than the memory limit " + lim +
            ": tmpfs pages count against the limit, so filling /dev/shm gets the container OOM-killed instead of a "
            "bus error",
        fix);
  } else if (!budget.holds(f.shm_size)) {
    add(out, Level::kWarn, "memory",
        "/dev/shm " + shm + " is " + share + " (more than memory_fraction_max " + budget.percent() +
            "): tmpfs pages count against it, so a full /dev/shm leaves the job little memory (OOM kill)",
        fix);
  } else {
    add(out, Level::kOk, "memory", "/dev/shm " + shm + " is " + share + " (at most " + budget.percent() + " allowed)");
  }
}

// What a door recorded (read_recorded), against the /dev/shm the container has.
void check_decision(const DoctorFacts& f, std::vector<Finding>& out) {
  const Recorded& rec = f.recorded;
  if (!rec.error.empty()) {
    add(out, Level::kWarn, "decision", rec.error,
        "start it again through gpu-run, gpu-run-runtime or the hook, which write the record themselves");
    return;
  }
  if (!rec.record) return;
  const DecisionRecord& r = *rec.record;
  std::string what = (r.door.empty() ? std::string("a door") : r.door) + " recorded (its " + rec.where + ") ";
  what += r.size ? format_size(*r.size) : std::string("no size (the host's /dev/shm)");
  if (!r.profile.empty()) what += ", profile " + r.profile;
  if (r.workers) what += ", " + std::to_string(r.workers) + " workers x a batch of " + std::to_string(r.batch_size);
  // The guard's own figure: the record's ceiling within the container's budget and the host's memory.
  GuardLimits own;
  if (f.memory_limit && *f.memory_limit > 0)
    own.budget_bytes = MemoryBudget{*f.memory_limit, f.memory_fraction_max}.bytes();
  const std::uint64_t ceiling = growth_ceiling(guard_limits_of_record(r, own, f.host_memory), 0);
  what += ceiling ? ", the guard may grow it to " + format_size(ceiling) : std::string(", no ceiling recorded");
  if (!r.size || !has_shm(f) || host_shm(f) || f.shm_size >= *r.size) {
    add(out, Level::kOk, "decision", what + (has_shm(f) ? "; /dev/shm has " + format_size(f.shm_size) : ""));
    return;
  }
  add(out, Level::kFail, "decision",
      what + ", but /dev/shm has " + format_size(f.shm_size) + ": the size was not applied",
      "see the host log of gpu-run (/var/log/gpu-run.log or the config's log) for that container's start");
}

// The plan's workers against the command line's, as the door that sized the container saw them
// and warned of at its start (the record's command_flag).
bool check_command_workers(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.recorded.record) return false;
  const DecisionRecord& r = *f.recorded.record;
  if (r.command_flag.empty() || r.command_workers == r.workers) return false;
  add(out, r.command_workers > r.workers ? Level::kWarn : Level::kOk, "workers",
      "the command line's '" + r.command_flag + "' starts " + std::to_string(r.command_workers) +
          " DataLoader workers, but " + (r.door.empty() ? std::string("gpu-run") : r.door) + " planned /dev/shm (" +
          (r.size ? format_size(*r.size) : std::string("none")) + ") for " + std::to_string(r.workers) +
          " (its record, gpu-run.decision)",
      workers_fix(r.command_workers, r.door));
  return true;
}

void check_workers(const DoctorFacts& f, std::vector<Finding>& out) {
  if (check_command_workers(f, out)) return;
  const std::string cpus = f.cpus ? std::to_string(*f.cpus) + " CPU" + (*f.cpus == 1 ? "" : "s") +
                                        (f.cpus_source.empty() ? "" : " (" + f.cpus_source + ")")
                                  : std::string("an unknown number of CPUs");
  // The workers gpu-run planned: its record's, else the environment's (the name it writes, else
  // the request's).
  std::string name = request_key(RequestKey::kWorkers).env;
  std::optional<std::string> workers;
  if (f.recorded.record && f.recorded.record->workers) {
    name = "gpu-run.decision workers";
    workers = std::to_string(f.recorded.record->workers);
  } else if (const EnvValue e = env_value(f.env, request_key(RequestKey::kWorkers)); e.value) {
    name = e.name;
    workers = e.value->substr(0, 80);
  }
  if (!workers) {
    // gpu-run-runtime and the hook size /dev/shm in the spec and leave the environment alone.
    const auto profile = env_of(f, kEnvProfile);
    std::string why;
    if (f.runtime.find("gpu-run") != std::string::npos)
      why = ": the runtime " + f.runtime + " (gpu-run-runtime) sized /dev/shm and sets no environment";
    else if (profile)
      why = ": " + assignment(kEnvProfile, *profile) +
            " asked gpu-run-runtime or the hook to size /dev/shm, and "
            "they set no environment";
    else
      why = " (gpu-run and the webhook set it; gpu-run-runtime and the hook size /dev/shm without it)";
    add(out, Level::kOk, "workers",
        "the container may use " + cpus + "; " + request_key(RequestKey::kWorkers).env + " is not set" + why +
            (why[0] == ':' ? ", so the job's DataLoader picks its own workers (the plan assumed the profile's)" : ""));
    return;
  }
  std::uint64_t n = 0;
  try {
    n = parse_count(*workers, name);
  } catch (const Error&) {
    add(out, Level::kWarn, "workers", assignment(name, *workers) + " is not a number",
        "let gpu-run set it (gpu-run --profile NAME), or set a whole number");
    return;
  }
  if (f.cpus && n > *f.cpus) {
    add(out, Level::kWarn, "workers",
        assignment(name, *workers) + " DataLoader workers per GPU rank, but the container may use " + cpus +
            ": the workers compete for CPUs and each holds batches in /dev/shm",
        "start it with gpu-run without --workers (workers_per_gpu \"auto\" follows the CPUs), or "
        "give it more "
        "CPUs (--cpus, --cpuset-cpus)");
  } else {
    add(out, Level::kOk, "workers",
        assignment(name, *workers) + " DataLoader workers per GPU rank; the container may use " + cpus);
  }
}

// One finding about the segments of one kind in /dev/shm: OK when there are none, else `level`
// with their count, space and names, and why they are there.
void check_segments(const DoctorFacts& f, bool (*is_kind)(const std::string&), const char* check,
                    const std::string& pattern, Level level, const std::string& why, const std::string& fix,
                    std::vector<Finding>& out) {
  std::vector<ShmFile> found;
  for (const auto& file : f.files)
    if (is_kind(file.name)) found.push_back(file);
  if (found.empty()) {
    add(out, Level::kOk, check, "no " + pattern + " segments in /dev/shm");
    return;
  }
  add(out, level, check,
      std::to_string(found.size()) + " " + pattern + " segment" + (found.size() == 1 ? "" : "s") + " holding " +
          format_size(total_bytes(found)) + " of /dev/shm: " + list_files(found) + ". " + why,
      fix);
}

void check_segments(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!has_shm(f)) return;
  check_segments(f, is_torch_segment, "torch-leftovers", "torch_*", Level::kWarn,
                 "PyTorch's file_system sharing strategy leaves these behind when workers are killed "
                 "(the default file_descriptor strategy unlinks its segments at once)",
                 "when no training job runs in the container: rm /dev/shm/torch_*; keep torch.multiprocessing's "
                 "default file_descriptor strategy instead of set_sharing_strategy('file_system')",
                 out);
  check_segments(f, is_nccl_segment, "nccl", "nccl-*", Level::kOk,
                 "NCCL's shared-memory transport between ranks uses them; with no job running they are leftovers "
                 "of a killed one",
                 "", out);
}

// doctor run on the host, not in a container: the container checks do not apply to it.
void check_host(const DoctorFacts& f, std::vector<Finding>& out) {
  const std::string shm =
      has_shm(f) ? " (" + format_size(f.shm_used) + " of " + format_size(f.shm_size) + " used)" : "";
  add(out, Level::kOk, "where",
      "doctor ran on this machine, not in a container: it looked at the host's /dev/shm" + shm +
          ", which no container gets unless started with --ipc=host",
      "to check a container: gpu-run-ctl doctor CONTAINER (a running one: its /dev/shm; an exited one: its exit "
      "status and logs), or run gpu-run-ctl doctor inside it; for a crashed job's log: gpu-run-ctl doctor --log "
      "FILE");
}

// gpu-run's runtime entries against the GPU runtimes of the same file: a container started
// through gpu-run must still pass through NVIDIA's runtime (docs/ARCHITECTURE.md, "The runtime
// chain").
void check_runtime_chain(const DoctorFacts& f, std::vector<Finding>& out) {
  for (const RuntimeEntryFacts& e : f.runtime_entries) {
    if (!e.gpu_run) continue;
    const std::string entry = e.file + "'s runtime \"" + e.name + "\"";
    const std::string fix = "gpu-run-ctl configure " + e.engine +
                            (e.engine == "docker" ? " --daemon-json " : " --containerd-config ") + e.file +
                            " (it chains the engine's default runtime; make NVIDIA's the default first if it is not)";
    if (e.execs.empty()) {
      add(out, Level::kFail, "runtime-chain",
          entry + " runs gpu-run-runtime, which execs what " + e.execs_how +
              " names: not an executable file here, so every container started through it fails",
          fix);
      continue;
    }
    std::string bypassed;
    bool reached = false;
    for (const RuntimeEntryFacts& g : f.runtime_entries) {
      if (g.file != e.file || !g.gpu) continue;
      if (!g.binary.empty() && g.binary == e.execs) reached = true;
      bypassed += (bypassed.empty() ? "" : ", ") + std::string("\"") + g.name + "\" (" +
                  (g.binary.empty() ? std::string("not found") : g.binary) + ")";
    }
    if (!bypassed.empty() && !reached) {
      add(out, Level::kWarn, "runtime-chain",
          entry + " runs gpu-run-runtime, which execs " + e.execs + " (" + e.execs_how +
              "), bypassing the GPU runtime " + bypassed +
              " of the same file: a container started through gpu-run never passes through NVIDIA's runtime (in "
              "its legacy mode it starts without its GPUs)",
          fix);
      continue;
    }
    add(out, Level::kOk, "runtime-chain", entry + ": gpu-run-runtime -> " + e.execs + " (" + e.execs_how + ")");
  }
}

// gpu-run's containerd drop-in carries a copy of the CRI section (containerd 1.x replaces a
// plugin's whole section): when another tool (NVIDIA's toolkit) rewrote the section since, the
// drop-in, read last, undoes that change.
void check_containerd_dropin(const DoctorFacts& f, std::vector<Finding>& out) {
  if (f.containerd_dropin.empty() || f.containerd_dropin_stale.empty()) return;
  add(out, Level::kWarn, "containerd-dropin",
      f.containerd_dropin + " carries a copy of containerd's CRI section that another tool changed since (" +
          f.containerd_dropin_stale +
          "): containerd 1.x reads the drop-in last and takes the whole section from it, so that change is undone",
      "gpu-run-ctl configure containerd (it copies the section again), then systemctl restart containerd");
}

void check_sysctls(const DoctorFacts& f, std::vector<Finding>& out) {
  if (f.sysctls.empty()) return;
  std::string set;
  for (const auto& [key, value] : f.sysctls) set += (set.empty() ? "" : ", ") + key + "=" + value;
  add(out, Level::kOk, "shmmax",
      set +
          " (not the kernel's default): these limit System V shmget segments only; PyTorch and "
          "NCCL use "
          "/dev/shm, whose size they do not change",
      "nothing to gain from them for PyTorch: size /dev/shm instead (gpu-run --profile NAME)");
}

}  // namespace

void put_workers_mismatch_first(const CrashFacts& f, std::vector<Finding>& findings) {
  if (!f.command_flag || !f.workers || worst_level(findings) != Level::kFail) return;
  std::uint64_t planned = 0;
  try {
    planned = parse_count(*f.workers, "workers");
  } catch (const Error&) {
    return;
  }
  if (f.command_workers <= planned) return;
  findings.insert(findings.begin(),
                  {Level::kFail, "workers-mismatch",
                   "the command line's '" + *f.command_flag + "' started " + std::to_string(f.command_workers) +
                       " DataLoader workers, but /dev/shm" +
                       (f.planned_shm ? " (" + format_size(*f.planned_shm) + ")" : std::string()) +
                       " was planned for " + *f.workers + " (gpu-run said so at the start): the job needed more than " +
                       "the plan because it ran other workers than planned",
                   workers_fix(f.command_workers, f.door_name)});
}

const char* level_name(Level level) {
  static const char* const kNames[] = {"OK", "WARN", "FAIL"};
  return enum_name(level, kNames);
}

bool is_torch_segment(const std::string& name) { return name.rfind("torch_", 0) == 0; }
bool is_nccl_segment(const std::string& name) { return name.rfind("nccl-", 0) == 0; }

std::vector<Finding> diagnose(const DoctorFacts& f) {
  std::vector<Finding> out;
  if (f.on_host) {
    check_host(f, out);
    check_runtime_chain(f, out);
    check_containerd_dropin(f, out);
    return out;
  }
  check_mount(f, out);
  check_ipc(f, out);
  check_size(f, out);
  check_sizing(f, out);
  check_use(f, out);
  check_memory(f, out);
  check_decision(f, out);
  check_workers(f, out);
  check_segments(f, out);
  check_sysctls(f, out);
  return out;
}

Level worst_level(const std::vector<Finding>& findings) {
  Level worst = Level::kOk;
  for (const auto& x : findings) worst = std::max(worst, x.level);
  return worst;
}

int doctor_exit_code(const std::vector<Finding>& findings) {
  switch (worst_level(findings)) {
    case Level::kOk:
      return kExitOk;
    case Level::kWarn:
      return kDoctorExitWarn;
    case Level::kFail:
      return kDoctorExitFail;
  }
  return kDoctorExitFail;
}

}  // namespace gpurun
