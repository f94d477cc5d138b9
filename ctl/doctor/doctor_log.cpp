#include "ctl/doctor/doctor_log.hpp"

#include <algorithm>
#include <cctype>

#include "base/units.hpp"
#include "decision/contract.hpp"

namespace gpurun {
namespace {

constexpr std::size_t kMaxShownLine = 240;

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
           (f.gpus ? *f.gpus + " GPU(s), " : "") + f.workers.value_or("?") +
           (f.workers == "1" ? " worker" : " workers") + " x batch " + f.batch_size.value_or("?") + " per rank) of " +
           format_size(*f.planned_shm) + " was applied and was too small for what the job wrote.";
  return f.shm_size ? " The container's /dev/shm was " + format_size(*f.shm_size) +
                          (*f.shm_size == 64 * kMiB ? " (Docker's default)." : ".")
                    : "";
}

// The sizing flags of the job: those gpu-run recorded, placeholders for the others.
std::string job_flags(const CrashFacts& f) {
  return "--profile " + f.profile.value_or("NAME") + " --gpus " + f.gpus.value_or("N") + " --workers " +
         f.workers.value_or("W") + " --batch-size " + f.batch_size.value_or("B");
}

bool in_kubernetes(const CrashFacts& f) { return f.door == CrashDoor::kKubernetes; }

std::string annotation(RequestKey key, const std::string& value) {
  return std::string(request_key(key).annotation) + ": " + value;
}

// Where a pod's sizing is changed: its template (a pod's own annotations change nothing once it runs).
std::string pod_template(const CrashFacts& f) {
  return f.pod ? "the template of pod " + *f.pod + " (its Deployment's, Job's, ...)" : "the pod's template";
}

// The ways a pod gets its /dev/shm sized, after the annotations that ask for it.
std::string pod_routes(const CrashFacts& f) {
  return " in " + pod_template(f) +
         ", sized where the admission webhook runs (gpu-run-ctl k8s webhook-manifests) or the node's runtime "
         "handler (runtimeClassName: gpu-run); or the /dev/shm emptyDir written into the manifest: gpu-run-ctl k8s "
         "-f MANIFEST --profile " +
         f.profile.value_or("NAME") + " | kubectl apply -f -";
}

// The command that sizes /dev/shm for the job.
std::string sizing_fix(const CrashFacts& f) {
  if (in_kubernetes(f)) {
    if (sized_by_gpu_run(f))
      return "the same annotations would get the same size: run the node guard, which grows a pod's /dev/shm "
             "before it fills (gpu-run-ctl k8s guard-manifests | kubectl apply -f -), or measure the job once "
             "(gpu-run-ctl calibrate --out-profile NAME " +
             job_flags(f) + " -- IMAGE COMMAND...) and ship the profile in the ConfigMap gpu-run-profiles";
    return "size the pod for the job: the annotations " + annotation(RequestKey::kProfile, f.profile.value_or("NAME")) +
           ", " + annotation(RequestKey::kWorkers, f.workers.value_or("W")) + ", " +
           annotation(RequestKey::kBatchSize, f.batch_size.value_or("B")) + pod_routes(f) +
           " (gpu-run-ctl plan --profile " + f.profile.value_or("NAME") + " --gpus " + f.gpus.value_or("N") +
           " prints the size first)";
  }
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

// "--shm-size SIZE" for an engine with no gpu-run profile term (item: vLLM, Ray, Triton): the
// size the log asked for when it says, with the doors that set it.
std::string shm_size_fix(const CrashFacts& f, std::optional<std::uint64_t> at_least) {
  const std::string size = at_least ? engine_size(round_up(*at_least, kMiB)) : std::string("SIZE");
  if (in_kubernetes(f))
    return "the annotation " + annotation(RequestKey::kShmSize, size) + " in " + pod_template(f) +
           ", sized where the admission webhook runs (gpu-run-ctl k8s webhook-manifests) or the node's runtime "
           "handler (runtimeClassName: gpu-run); or an emptyDir of medium: Memory and sizeLimit: " +
           size + " mounted at /dev/shm";
  return "gpu-run --shm-size " + size + " IMAGE ... (docker/podman run --shm-size " + size +
         "; in Kubernetes an emptyDir of medium Memory at /dev/shm, `gpu-run-ctl k8s`)";
}

// A profile's plan for the job's ranks, in the door's terms (NCCL's and DeepSpeed's segments).
std::string ranks_sizing(const CrashFacts& f) {
  if (in_kubernetes(f))
    return "the annotation " + annotation(RequestKey::kProfile, f.profile.value_or("NAME")) + " in " + pod_template(f) +
           " (its containers' nvidia.com/gpu limit gives the ranks), sized by the webhook or the "
           "runtime handler";
  return "gpu-run --profile " + f.profile.value_or("NAME") + " --gpus " + f.gpus.value_or("N") + " IMAGE ...";
}

// The key a Triton line names ("'triton_python_backend_shm_region_3'").
std::string quoted_after(const std::string& text, std::string_view key) {
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size();
  const std::size_t end = text.find('\'', start);
  return end == std::string::npos ? "" : text.substr(start, end - start);
}

// The engines the log names, for a message: " (vLLM, Ray)".
std::string engines_named(const CrashFacts& f) {
  std::string out;
  for (const std::string& e : f.engines) out += (out.empty() ? "" : ", ") + e;
  return out.empty() ? "" : " (the log names " + out + ")";
}

bool names(const CrashFacts& f, const char* engine) {
  return std::find(f.engines.begin(), f.engines.end(), engine) != f.engines.end();
}

// One rule a family: the evidence of that family to its finding, appended to `out`.

void dataloader_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* killed = first(f, CrashEvidence::kWorkerKilledByBusError);
  const CrashEvidence* bus = first(f, CrashEvidence::kBusErrorInWorker);
  if (!killed && !bus) return;
  out.push_back({Level::kFail, "dataloader-bus-error",
                 "a DataLoader worker died of a bus error (" + where(killed ? *killed : *bus) +
                     "): each worker writes the batches it collates into /dev/shm, and a write to a full "
                     "tmpfs is SIGBUS, not an error PyTorch can catch." +
                     had(f),
                 sizing_fix(f), "PyTorch DataLoader"});
}

void torch_shm_rule(const CrashFacts& f, std::vector<Finding>& out) {
  for (CrashEvidence::Kind kind : {CrashEvidence::kTorchShmNoSpace, CrashEvidence::kTorchShmAllocate}) {
    if (const CrashEvidence* e = first(f, kind))
      out.push_back({Level::kFail, "torch-shm-no-space",
                     "PyTorch could not allocate a shared-memory segment in /dev/shm (" + where(*e) +
                         "): it was full when a worker or torch.multiprocessing shared a tensor." + had(f),
                     sizing_fix(f), "PyTorch"});
  }
}

void shm_write_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* e = first(f, CrashEvidence::kShmWriteNoSpace);
  if (!e) return;
  out.push_back({Level::kFail, "shm-no-space",
                 "a write into /dev/shm failed, it was full (" + where(*e) + ")." + had(f), sizing_fix(f)});
}

void nccl_rule(const CrashFacts& f, std::vector<Finding>& out) {
  if (!has(f, CrashEvidence::kNcclSegment)) return;
  // "(size N)" is the segment; "failed to extend ... to N bytes" counts a 4-byte header on top.
  std::uint64_t largest = 0, extended = 0;
  std::vector<std::string> segments;
  for (const CrashEvidence& e : f.evidence) {
    if (e.kind != CrashEvidence::kNcclSegment) continue;
    const bool creating = e.detail != "extend";
    if (e.bytes) (creating ? largest : extended) = std::max(creating ? largest : extended, *e.bytes);
    // The segment's name: /dev/shm/nccl-X (NCCL 2.12 and later) or nccl-shm-recv-... (before).
    std::size_t at = e.text.find("segment ");
    if (at == std::string::npos) at = e.text.find("extend ");
    if (at == std::string::npos) continue;  // posix_fallocate's line names none
    at = e.text.find(' ', at) + 1;
    const std::string name = e.text.substr(at, e.text.find_first_of(" ,)", at) - at);
    if (!name.empty() && std::find(segments.begin(), segments.end(), name) == segments.end()) segments.push_back(name);
  }
  if (!largest) largest = extended;
  const CrashEvidence& e = *first(f, CrashEvidence::kNcclSegment);
  std::string numbers =
      largest ? " NCCL asked for " + format_size(largest) + " per segment (" + std::to_string(largest) +
                    " bytes); its SHM transport creates one per peer it cannot reach by P2P, in every rank" +
                    (segments.size() > 1 ? " (" + std::to_string(segments.size()) + " failed in this log)" : "") + "."
              : " NCCL's SHM transport creates a segment per peer it cannot reach by P2P, in every rank.";
  out.push_back({Level::kFail, "nccl-shm",
                 "NCCL could not create its shared-memory segment in /dev/shm (" + where(e) + ")." + numbers + had(f),
                 "give /dev/shm room for NCCL on top of the DataLoader: " + ranks_sizing(f) +
                     " counts NCCL's segments for more than one rank (the profile's nccl section: transport, "
                     "channels), or " +
                     (in_kubernetes(f) ? annotation(RequestKey::kShmSize, "SIZE") : std::string("--shm-size SIZE")) +
                     "; or set NCCL_SHM_DISABLE=1 (NCCL then uses P2P or sockets: "
                     "slower between GPUs without NVLink); newer NCCL releases keep these buffers out of /dev/shm "
                     "with NCCL_CUMEM_HOST_ENABLE=1",
                 "NCCL"});
}

void vllm_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* e = first(f, CrashEvidence::kVllmShmInsufficient);
  if (!e) return;
  const std::string numbers = e->bytes && e->available ? " It needs " + format_size(*e->bytes) + " and " +
                                                             format_size(*e->available) + " was free."
                                                       : "";
  out.push_back(
      {Level::kFail, "vllm-shm",
       "vLLM refused to start: /dev/shm is too small for its shared-memory message queues (" + where(*e) + ")." +
           numbers +
           " With tensor or pipeline parallelism > 1 vLLM's MessageQueue maps a broadcast ring of fixed-size chunks "
           "in /dev/shm (psm_* segments), plus a response queue per worker; NCCL's segments come on top." +
           had(f),
       "give /dev/shm at least what vLLM asks plus NCCL's share: " + shm_size_fix(f, e->bytes) +
           "; or shrink the rings: VLLM_MQ_MAX_CHUNK_BYTES_MB=N (the size of each chunk in MiB; a message larger "
           "than a chunk goes over ZMQ instead of /dev/shm)",
       "vLLM"});
}

void ray_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* big = first(f, CrashEvidence::kRayStoreTooBig);
  const CrashEvidence* tmp = first(f, CrashEvidence::kRayStoreOnTmp);
  const CrashEvidence* shrunk = first(f, CrashEvidence::kRayStoreShrunk);
  if (!big && !tmp && !shrunk) return;
  const CrashEvidence& e = big ? *big : tmp ? *tmp : *shrunk;
  const std::string store = e.bytes ? " an object store of " + format_size(*e.bytes) : " its object store";
  const std::string shm = e.available ? " /dev/shm had " + format_size(*e.available) : " /dev/shm was smaller";
  const std::string fix =
      "give /dev/shm more than the object store: " + shm_size_fix(f, e.bytes) +
      (e.detail.empty() ? "" : " (Ray's own advice: --shm-size=" + e.detail + ")") +
      "; or size the store to fit: ray start --object-store-memory=BYTES (ray.init(object_store_memory=...)) below "
      "what /dev/shm holds; or put it on disk on purpose, slower: ray start --plasma-directory=DIR "
      "(ray.init(_plasma_directory=...))";
  if (big)
    out.push_back({Level::kFail, "ray-object-store",
                   "Ray asked for" + store + " and" + shm + " (" + where(e) +
                       "): the raylet stops, or refuses to start, when the store does not fit /dev/shm." + had(f),
                   fix, "Ray"});
  else if (!tmp)
    out.push_back({Level::kWarn, "ray-object-store",
                   "Ray shrank its object store to fit /dev/shm, because" + shm + " (" + where(e) +
                       "): it starts with 80% of what /dev/shm had, and a job that puts more into the store "
                       "than that fails or evicts objects later." +
                       had(f),
                   fix, "Ray"});
  else
    out.push_back({Level::kWarn, "ray-object-store",
                   "Ray put its object store in a directory on disk instead of /dev/shm, because" + shm + " (" +
                       where(e) +
                       "): it runs, slower (\"This will harm performance!\"), and a large store on a small disk "
                       "fails later." +
                       had(f),
                   fix, "Ray"});
}

void triton_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* e = first(f, CrashEvidence::kTritonShm);
  if (!e) return;
  const bool grow = e->detail.rfind("grow: ", 0) == 0;
  const std::string error = grow ? e->detail.substr(6) : e->detail;
  std::string key = quoted_after(e->text, "key '");
  const std::string what =
      std::string(grow ? "grow" : "create") + " the shared-memory region " + (key.empty() ? "" : key + " ") +
      "of a model instance" +
      (e->bytes ? " to " + format_size(*e->bytes) + " (" + std::to_string(*e->bytes) + " bytes)" : "");
  const std::string fix =
      "give /dev/shm a region per python-backend model instance plus their growth: " + shm_size_fix(f, {}) +
      " (Triton's own advice: --shm-size); or lower what each starts with: tritonserver "
      "--backend-config=python,shm-default-byte-size=BYTES (and shm-growth-byte-size), or fewer "
      "instances (instance_group count); servers that share one /dev/shm each need their own "
      "--backend-config=python,shm-region-prefix-name=PREFIX";
  const std::string regions =
      " Every instance of every python-backend model maps its own region, which starts at "
      "shm-default-byte-size and grows by shm-growth-byte-size as requests need.";
  const bool not_space =
      error.find("File exists") != std::string::npos || error.find("Connection timed out") != std::string::npos;
  if (error.find("No space left on device") != std::string::npos || error == "out of shared memory") {
    out.push_back(
        {Level::kFail, "triton-python-shm",
         "Triton's python backend could not " + what + ": /dev/shm is full (" + where(*e) + ")." + regions + had(f),
         fix, "Triton"});
    return;
  }
  // Releases of spring 2021 name no error; those built on Boost.Interprocess 1.76 to 1.78 name the
  // errno left by an earlier call, as shared_memory_object::truncate() read errno after
  // posix_fallocate(), which returns its error instead (boostorg/interprocess#166).
  if (!not_space) {
    out.push_back({Level::kWarn, "triton-python-shm",
                   "Triton's python backend could not " + what + " (" + where(*e) + ")" +
                       (error.empty() ? ", with no error named" : ", with \"" + error + "\"") +
                       ": the python backend gives up on a region this way when posix_fallocate() finds no room "
                       "in /dev/shm, and builds on Boost.Interprocess 1.76 to 1.78 print a stale errno (\"No "
                       "such file or directory\") instead of ENOSPC. df -h /dev/shm shows whether it filled." +
                       regions + had(f),
                   fix, "Triton"});
    return;
  }
  out.push_back({Level::kWarn, "triton-python-stub",
                 "Triton's python backend could not " + what + ", but not for lack of space (" + where(*e) +
                     "): /dev/shm's size is not the cause.",
                 "Error: File exists means a region of that name is left from a server that died (gpu-run-ctl reap "
                 "lists it) or another server shares this IPC namespace; Connection timed out means the python stub "
                 "did not answer in time (--backend-config=python,stub-timeout-seconds=N, and the stub's own log)",
                 "Triton"});
}

// A process killed by SIGBUS, with no line that says which engine's write it was.
void sigbus_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const bool any_shm_failure =
      std::any_of(out.begin(), out.end(), [](const Finding& x) { return x.level == Level::kFail; });
  const CrashEvidence* e = first(f, CrashEvidence::kSigbusExit);
  if (any_shm_failure || !(e || (f.exit_code && *f.exit_code == 135))) return;
  const auto nccl_frames = std::find_if(f.evidence.begin(), f.evidence.end(), [](const CrashEvidence& x) {
    return x.kind == CrashEvidence::kSigbusExit && x.detail == "nccl";
  });
  if (nccl_frames != f.evidence.end()) {
    out.push_back(
        {Level::kFail, "sigbus-exit",
         "a process was killed by SIGBUS in NCCL's own frames (" + where(*nccl_frames) +
             "): NCCL's SHM transport and its proxy map segments in /dev/shm (/dev/shm/nccl-*), and NCCL 2.12 to "
             "2.18 size them with ftruncate() alone, so a /dev/shm too small for them is a bus error at the first "
             "write instead of an error NCCL can print." +
             had(f),
         "give /dev/shm room for NCCL's segments: " + ranks_sizing(f) + " counts them for the ranks of a node, or " +
             (in_kubernetes(f) ? annotation(RequestKey::kShmSize, "SIZE") : std::string("--shm-size SIZE")) +
             "; NCCL_SHM_DISABLE=1 as a test (the bus error goes away if /dev/shm was the cause; NCCL then uses "
             "P2P or sockets, slower between GPUs without NVLink); NCCL 2.19 and later fallocate the segments "
             "and report \"failed to extend\" instead",
         "NCCL"});
    return;
  }
  std::string engine_fix;
  if (names(f, "vLLM"))
    engine_fix =
        "give /dev/shm room for vLLM's tensor-parallel workers (NCCL's segments; the shared-memory "
        "MessageQueue in releases that have shm_broadcast.py, shrunk by VLLM_MQ_MAX_CHUNK_BYTES_MB): " +
        shm_size_fix(f, {});
  else if (names(f, "DeepSpeed"))
    engine_fix =
        "give /dev/shm room for DeepSpeed's ranks (NCCL's segments between GPUs; on CPU its "
        "deepspeed_allreduce_buffer_* segment of about 66 MiB per rank): " +
        ranks_sizing(f) + " or " +
        (in_kubernetes(f) ? annotation(RequestKey::kShmSize, "SIZE") : std::string("--shm-size SIZE"));
  else
    engine_fix = sizing_fix(f);
  out.push_back({Level::kFail, "sigbus-exit",
                 std::string("a process was killed by SIGBUS, a bus error") + (e ? " (" + where(*e) + ")" : "") +
                     (f.exit_code && *f.exit_code == 135 ? " (exit status 135, 128 + SIGBUS)" : "") + engines_named(f) +
                     ": in these jobs that is most often a write to a full /dev/shm (a tensor shared between "
                     "processes, NCCL's or the engine's segments); the other cause is a memory-mapped file that "
                     "shrank or whose disk filled." +
                     had(f),
                 engine_fix +
                     "; if /dev/shm is full of segments that killed jobs left, gpu-run-ctl reap lists them (--delete "
                     "frees them); if the bus error hit while reading a memory-mapped file (a checkpoint, a dataset), "
                     "/dev/shm is not the cause: that file shrank or its disk filled",
                 f.engines.empty() ? "" : f.engines.front()});
}

// ncclSystemError with no line saying which call failed: NCCL prints its WARN lines only when
// NCCL_DEBUG is set, and the other NCCL rules read those.
void nccl_system_error_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* e = first(f, CrashEvidence::kNcclSystemError);
  if (!e || has(f, CrashEvidence::kNcclSegment) || has(f, CrashEvidence::kNcclShmAttach) ||
      has(f, CrashEvidence::kNcclNetwork) || has(f, CrashEvidence::kNcclTimeout))
    return;
  if (std::any_of(out.begin(), out.end(), [](const Finding& x) { return x.level == Level::kFail; })) return;
  out.push_back(
      {Level::kWarn, "nccl-system-error",
       "NCCL stopped with ncclSystemError, \"unhandled system error\" (" + where(*e) +
           "), and the log has no NCCL WARN line saying which system call failed. In a container the most common "
           "one is /dev/shm: the SHM transport creates a segment per peer it cannot reach by P2P "
           "(/dev/shm/nccl-*, nccl-shm-* before 2.12), and Docker's 64 MiB holds a few. Other causes are sockets, "
           "InfiniBand, /dev/shm's permissions, or a peer that died first." +
           had(f),
       "tell them apart: rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,SHM,NET) and give doctor that log: "
       "\"Error while creating shared memory segment\", \"failed to extend /dev/shm/nccl-\" or \"posix_fallocate "
       "failed: No space left on device\" is /dev/shm running out; df -h /dev/shm while it starts; "
       "NCCL_SHM_DISABLE=1 as a test (if the error goes away, NCCL's segments did not fit). If it is /dev/shm: " +
           ranks_sizing(f) + " counts NCCL's segments, or " +
           (in_kubernetes(f) ? annotation(RequestKey::kShmSize, "SIZE") : std::string("--shm-size SIZE")),
       "NCCL"});
}

// --- Not /dev/shm: each its own finding, and never a /dev/shm fix ---

void fd_limit_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* e = first(f, CrashEvidence::kFdLimit);
  if (!e) return;
  out.push_back({Level::kFail, "fd-limit",
                 "the job ran out of file descriptors (" + where(*e) +
                     "): under PyTorch's file_descriptor sharing strategy (Linux's default) every tensor a DataLoader "
                     "worker sends stays an open descriptor until the main process frees it; \"received 0 items of "
                     "ancdata\" is the same limit hit while a descriptor crossed the socket. /dev/shm's size is not "
                     "the cause.",
                 "raise the open-files limit (ulimit -n 65536 in the shell that starts the job, docker run --ulimit "
                 "nofile=65536:65536), or call torch.multiprocessing.set_sharing_strategy('file_system') at the start "
                 "of the script (and of every worker_init_fn that sets its own)",
                 "PyTorch"});
}

void oom_rule(const CrashFacts& f, std::vector<Finding>& out) {
  const CrashEvidence* e = first(f, CrashEvidence::kOomKilled);
  if (!e && !(f.exit_code && *f.exit_code == 137)) return;
  if (!e && f.oom_killed == false) {
    out.push_back({Level::kWarn, "killed",
                   "the container was stopped by a SIGKILL from outside (exit status 137, and the engine says it was "
                   "not OOM-killed): `docker kill`, `docker stop` past its timeout, a supervisor; not memory, not "
                   "/dev/shm",
                   "see who stopped it (`docker events --filter container=NAME`); give `docker stop` a longer -t if "
                   "the job needs time to exit",
                   ""});
    return;
  }
  out.push_back({Level::kFail, "oom-killed",
                 std::string("a process was killed by SIGKILL") + (e ? " (" + where(*e) + ")" : " (exit status 137)") +
                     engines_named(f) +
                     ": the kernel's OOM killer sends it when the container or the host runs out of memory. Not a "
                     "full /dev/shm (that is a bus error).",
                 "raise the memory limit (docker run --memory, the pod's limits.memory) or lower what the job holds "
                 "(fewer DataLoader workers or a smaller prefetch_factor, smaller batches); `dmesg` or `docker inspect "
                 "--format '{{.State.OOMKilled}}'` confirms it. Pages in /dev/shm count against the same memory "
                 "limit: a larger /dev/shm does not help",
                 f.engines.empty() ? "" : f.engines.front()});
}

// The other look-alikes: a warning each, with where to look instead.
void lookalike_rules(const CrashFacts& f, std::vector<Finding>& out) {
  struct LookAlike {
    CrashEvidence::Kind kind;
    const char* check;
    const char* engine;
    const char* what;
    const char* fix;
  };
  static const LookAlike kLookAlikes[] = {
      {CrashEvidence::kVllmMqStalled, "vllm-mq-stalled", "vLLM",
       "vLLM's broadcast queue found no free block for a minute: a worker has not read its messages, because it "
       "hangs or is busy (compiling, loading, quantizing). The ring is allocated whole in /dev/shm at start; this is "
       "not /dev/shm running out",
       "see what the workers do: py-spy dump --pid WORKER_PID; the message repeats every minute while they load or "
       "compile and stops by itself; while serving it means a hung worker (its own log, NCCL_DEBUG=INFO)"},
      {CrashEvidence::kNcclShmAttach, "nccl-shm-attach", "NCCL",
       "an NCCL rank could not open a segment another rank created: the ranks do not see the same /dev/shm, or it "
       "was removed under them, or NCCL read a cuMem handle as a path (NVIDIA/nccl#2059); not a full /dev/shm",
       "run the ranks of a node in one IPC namespace (one container, or --ipc=host, or --ipc=container:X for all), "
       "keep systemd's RemoveIPC=no for the user running them, and try another NCCL release (NVIDIA/nccl#1589 went "
       "away on 2.21.5); NCCL_SHM_DISABLE=1 bypasses the SHM transport"},
      {CrashEvidence::kSegfault, "segfault", "", "a process died of a segmentation fault (SIGSEGV), not of /dev/shm",
       "PYTHONFAULTHANDLER=1 (faulthandler) prints the Python stack at the crash; a DataLoader worker's segfault "
       "usually comes from native code in the dataset (num_workers=0 shows it in the main process)"},
      {CrashEvidence::kCudaError, "cuda-error", "", "a CUDA error stopped the job: a GPU fault, not /dev/shm",
       "rerun with CUDA_LAUNCH_BLOCKING=1 to see the call that failed (CUDA reports errors asynchronously)"},
      {CrashEvidence::kNcclTimeout, "nccl-timeout", "NCCL",
       "a collective timed out: one rank stopped taking part (hung, slower, or on another code path), not /dev/shm",
       "find the rank that stalled: TORCH_NCCL_DUMP_ON_TIMEOUT=1 (PyTorch's flight recorder) and NCCL_DEBUG=INFO; "
       "raise the process group's timeout only if one step really takes that long"},
      {CrashEvidence::kNcclNetwork, "nccl-network", "NCCL",
       "NCCL's network connections failed (a reset, a closed peer, an InfiniBand completion error), not /dev/shm",
       "check the interface NCCL uses (NCCL_SOCKET_IFNAME=IFACE, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET); a peer "
       "that crashed first resets its sockets too: find the first error among the ranks"},
      {CrashEvidence::kDiskFull, "disk-full", "", "a write failed with no space left on a disk, not in /dev/shm",
       "df -h the directories the job writes (checkpoints, caches, the output directory) and free or enlarge that "
       "one"},
      {CrashEvidence::kTorchMmapNoMemory, "torch-mmap-enomem", "PyTorch",
       "mapping a shared tensor failed with ENOMEM: the process reached its limit of memory mappings "
       "(vm.max_map_count) or of memory, not /dev/shm's size",
       "raise vm.max_map_count (sysctl -w vm.max_map_count=262144) or share fewer, larger tensors; check the "
       "memory limit"},
  };
  for (const LookAlike& l : kLookAlikes) {
    if (const CrashEvidence* e = first(f, l.kind))
      out.push_back({Level::kWarn, l.check, std::string(l.what) + " (" + where(*e) + ").", l.fix, l.engine});
    else if (l.kind == CrashEvidence::kSegfault && f.exit_code && *f.exit_code == 139)
      out.push_back(
          {Level::kWarn, l.check, std::string(l.what) + " (exit status 139, 128 + SIGSEGV).", l.fix, l.engine});
  }
}

void fallback_rules(const CrashFacts& f, std::vector<Finding>& out) {
  if (!out.empty()) return;
  if (const CrashEvidence* e = first(f, CrashEvidence::kWorkersExited)) {
    out.push_back({Level::kWarn, "dataloader-exited",
                   "DataLoader workers exited unexpectedly (" + where(*e) +
                       ") and the log names no cause. In a container the most common one is a full /dev/shm: a "
                       "worker killed by SIGBUS while it wrote a batch there is reported this way when no SIGCHLD "
                       "handler named the signal (PyTorch sets it only when the DataLoader runs in the main thread). "
                       "The other is the kernel's OOM killer (SIGKILL); a worker's own exception prints its "
                       "traceback above this line." +
                       had(f),
                   "tell them apart: dmesg | grep -i 'killed process', docker inspect --format "
                   "'{{.State.OOMKilled}}' CONTAINER (a pod's reason OOMKilled) for the OOM killer, which a larger "
                   "memory limit fixes (a full /dev/shm counts against it too); df -h /dev/shm while the job runs, "
                   "or gpu-run-ctl doctor --container NAME, for a /dev/shm that filled, which the job's sizing fixes; "
                   "num_workers=0 shows a worker's own error in the main process",
                   "PyTorch DataLoader"});
    return;
  }
  out.push_back({Level::kOk, "crash-log",
                 "no /dev/shm failure recognised in " + std::to_string(f.lines) + " line" + (f.lines == 1 ? "" : "s") +
                     (f.exit_code ? " (exit status " + std::to_string(*f.exit_code) + ")" : "") +
                     ": no DataLoader bus error, no PyTorch, NCCL, vLLM, Ray or Triton shared-memory failure",
                 ""});
}

// The frames a stack dumper prints below a signal's line name NCCL ("ncclShmOpen",
// "ncclProxyService", "libnccl.so"), within the next `kFrameLines` lines.
constexpr std::size_t kFrameLines = 24;

bool nccl_frames_below(const std::vector<std::string_view>& lines, std::size_t at) {
  for (std::size_t i = at + 1; i < lines.size() && i <= at + kFrameLines; ++i) {
    const std::string_view l = lines[i];
    if (l.find("libnccl") != std::string_view::npos) return true;
    for (std::size_t n = l.find("nccl"); n != std::string_view::npos; n = l.find("nccl", n + 1))
      if (n + 4 < l.size() && std::isupper(static_cast<unsigned char>(l[n + 4]))) return true;
  }
  return false;
}

// A line without its surrounding blanks, for joining a re-wrapped message to its first line.
std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A log line as a person reads it: NUL bytes (PyTorch writes one after its bus-error message)
// as blanks, and without a terminal's CSI sequences (ESC [ parameters, intermediates, a final
// byte: a logger's colours, "\033[31mERROR\033[0m"), which would split the words the matchers read.
std::string plain_line(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\033' && i + 1 < raw.size() && raw[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < raw.size() && raw[j] >= 0x20 && raw[j] <= 0x3f) ++j;
      if (j < raw.size() && raw[j] >= 0x40 && raw[j] <= 0x7e) {
        i = j;
        continue;
      }
    }
    out += raw[i] == '\0' ? ' ' : raw[i];
  }
  return out;
}

// The part of a line the matchers read: a megabyte-long line (a progress bar that never printed
// a newline) still ends in the message that matters.
constexpr std::size_t kMaxMatchedLine = 4u << 20;

}  // namespace

void read_crash_log(std::string_view text, CrashFacts& f) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(pos, std::min(end - pos, kMaxMatchedLine)));
    pos = end + 1;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    // `kubectl logs --prefix`: "[pod/NAME/CONTAINER] " before each line.
    if (lines[i].rfind("[pod/", 0) == 0) {
      const std::size_t end = lines[i].find('/', 5);
      const std::size_t close = lines[i].find(']');
      if (end != std::string_view::npos && close != std::string_view::npos && close > end) {
        f.door = CrashDoor::kKubernetes;
        if (!f.pod) f.pod = shown(lines[i].substr(5, std::min<std::size_t>(end - 5, 253)));
      }
    }
    const std::string line = plain_line(lines[i]);
    note_engines(line, f.engines);
    auto match = match_crash_line(line);
    std::string seen_text = line;
    // A message a terminal or a paste re-wrapped ("killed by signal: Bus\nerror."): the line
    // with the next one.
    if (!match && i + 1 < lines.size() && !trimmed(line).empty()) {
      const std::string next = plain_line(lines[i + 1]);
      const std::string joined = std::string(trimmed(line)) + " " + std::string(trimmed(next));
      if (!match_crash_line(next) && (match = match_crash_line(joined))) seen_text = joined;
    }
    if (!match) continue;
    if (match->kind == CrashEvidence::kSigbusExit && nccl_frames_below(lines, i)) match->detail = "nccl";
    CrashEvidence e;
    static_cast<CrashLine&>(e) = std::move(*match);
    e.line = i + 1;
    e.text = shown(seen_text);
    const bool seen = std::any_of(f.evidence.begin(), f.evidence.end(),
                                  [&](const CrashEvidence& x) { return x.kind == e.kind && x.text == e.text; });
    if (!seen) f.evidence.push_back(std::move(e));
  }
  f.lines += lines.size();
}

std::vector<Finding> diagnose_crash(const CrashFacts& f) {
  std::vector<Finding> out;
  for (auto rule : {dataloader_rule, torch_shm_rule, shm_write_rule, nccl_rule, vllm_rule, ray_rule, triton_rule,
                    sigbus_rule, nccl_system_error_rule, fd_limit_rule, oom_rule, lookalike_rules, fallback_rules})
    rule(f, out);
  return out;
}

}  // namespace gpurun
