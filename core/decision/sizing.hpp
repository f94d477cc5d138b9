#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "decision/engines.hpp"
#include "decision/refusal.hpp"
#include "oci/gpus.hpp"
#include "profiles/profile.hpp"

namespace gpurun {

// What a job asks for on top of its profile. Unset values come from the profile.
struct SizingRequest {
  unsigned gpus = 0;                        // 0: no GPU, one loader
  std::optional<std::uint64_t> workers;     // per GPU rank
  std::optional<std::uint64_t> batch_size;  // per GPU rank
  std::optional<std::uint64_t> prefetch_factor;
  std::optional<std::uint64_t> memory_limit;  // the container's memory limit, if any
  // The container's limit before the door raises it by the planned /dev/shm (the webhook's raise
  // policy; memory_limit is then unset): what an engine that takes a share of it plans from.
  std::optional<std::uint64_t> limit_raised_from;
  unsigned cpus = 1;  // CPUs the container may use
  double memory_fraction_max = 0.5;
  GpuReach gpu_reach = GpuReach::unknown;
  std::string gpu_reach_why;  // how the door knows, for --explain ("--gpu-request none")
  // A guard will grow the container's /dev/shm (the node guard runs on this host, or gpu-run
  // --guard): a learned calibration may then start tight (kUnguardedLearnedHeadroom).
  bool guarded = false;
};

struct FieldBytes {
  std::string name;
  std::uint64_t bytes = 0;  // page-rounded bytes of this field per batch
};

// One DataLoader's share of a rank's /dev/shm.
struct LoaderPlan {
  std::string name;
  std::uint64_t workers = 0;
  bool workers_auto = false;
  std::uint64_t batch_size = 0;
  std::uint64_t prefetch_factor = 0;
  bool pin_memory = true;
  bool pin_thread = false;  // a pin thread copies its batches out of /dev/shm (hold 0 from loader_hold)
  bool persistent_workers = false;
  Collate collate = Collate::stack;
  LoaderOrder order = LoaderOrder::any;                     // the profile's (profile.hpp)
  bool last() const { return order == LoaderOrder::last; }  // one pass after every other loader's last
  std::uint64_t hold = 0;
  std::string hold_why;  // loader_hold's reason, and the batches its workers' inheritance adds
  std::vector<FieldBytes> fields;
  bool calibrated = false;
  std::uint64_t batch_bytes = 0;
  std::uint64_t sem_bytes = 0;  // its multiprocessing queues' semaphores (glibc sem_open pages)
  std::uint64_t bytes = 0;      // (prefetch_factor x workers + hold) x batch_bytes + sem_bytes
  // What stays after its last pass, while a loader ordered last runs: all of it with
  // persistent_workers (a pass broken off keeps its prefetched batches), else hold x batch_bytes +
  // sem_bytes (its workers have exited; the loop's variables and what other workers inherited stay).
  std::uint64_t residue = 0;
};

// NCCL's /dev/shm for the ranks of one node, and where the figure came from.
struct NcclPlan {
  std::string source;  // "nccl" (the section), "measured", "nccl_reserve" (flat), "single rank"
  std::string transport;
  std::string host_mem;  // the section's host_mem: "cumem" puts the SHM transport's buffers off /dev/shm
  std::uint64_t channels = 0;
  std::uint64_t peers = 0;           // receive connections per rank and channel
  std::uint64_t measured_ranks = 0;  // "measured" and scaled: the ranks it was taken with; else 0
  std::uint64_t recv_segment = 0;    // page-rounded bytes of one receive segment
  std::uint64_t send_segment = 0;
  std::uint64_t bytes = 0;
};

// The decided size and every term that led to it.
struct ShmPlan {
  std::string profile;
  unsigned gpus = 0;
  unsigned ranks = 1;
  std::uint64_t workers = 0;
  bool workers_auto = false;
  unsigned cpus = 1;
  std::uint64_t batch_size = 0;
  std::uint64_t prefetch_factor = 0;
  bool pin_memory = true;
  std::uint64_t hold = 0;
  std::string hold_why;
  std::vector<FieldBytes> fields;
  bool calibrated = false;
  std::uint64_t batch_bytes = 0;
  std::uint64_t per_rank = 0;  // the sum over loaders, or the larger of the two phases below
  // With a loader ordered last: the other loaders' bytes (while they run), and their residues plus
  // the last loaders' bytes (after them). 0 without one.
  std::uint64_t per_rank_before_last = 0;
  std::uint64_t per_rank_last = 0;
  std::vector<LoaderPlan> loaders;  // the first is the one the request's workers/batch/prefetch set
  std::uint64_t nccl = 0;
  NcclPlan nccl_plan;
  EnginesPlan engines;  // the other engines the profile names (engines.hpp)
  double headroom = 1.0;
  // Set when a learned calibration was planned without a guard (kUnguardedLearnedHeadroom): the
  // headroom it would have had under one.
  std::optional<double> guarded_headroom;
  std::uint64_t need = 0;  // before the min/max clamp
  std::uint64_t shm = 0;   // the size to apply
  std::uint64_t min_shm = 0;
  std::uint64_t max_shm = 0;
  std::optional<std::uint64_t> memory_limit;
  double memory_fraction_max = 0.5;
  // The memory of the host it was planned on (HostFacts::mem_total); 0: unknown (the webhook).
  std::uint64_t host_memory = 0;
  // Set when the plan cannot be applied: why, with the numbers (each door words it).
  std::optional<Refusal> refusal;
  bool fits() const { return !refusal; }
};

// The memory budget: /dev/shm may take at most `fraction` of a memory limit, because tmpfs
// pages are charged to the container's cgroup (docs/ARCHITECTURE.md, "The memory budget").
// The one place the budget is computed: sizing, the container decision and doctor use it.
struct MemoryBudget {
  std::uint64_t limit = 0;
  double fraction = 0.5;

  std::uint64_t bytes() const;  // limit x fraction, rounded down
  // The smallest limit (MiB-rounded) whose budget holds `shm`.
  std::uint64_t limit_for(std::uint64_t shm) const;
  std::string percent() const;  // "50%"
  bool holds(std::uint64_t shm) const { return shm <= bytes(); }
  // "does not fit the memory limit L (shm pages count against it; at most P = B may be shm)",
  // the words every over-budget message uses.
  std::string over() const;
};

// A calibrated batch is a peak sampled in one run divided by the model's bound, not a bound
// itself: a job's peak differs from run to run by the batches in flight when it is reached
// (bench/GUARD-FUZZ.md: the same job's peaks 0.73-1.17x the smallest size it runs at). A
// calibration without a burst (calibrate's, and those written before) keeps this headroom over it.
inline constexpr double kCalibratedHeadroom = 1.25;
// A learned calibration (profiles learn) also has its run's burst, the largest rise of use between
// two samples: one batch written, or the batches of several workers at once. Its headroom is the
// peak plus kLearnedBursts bursts, at least kLearnedMinHeadroom and at most kCalibratedHeadroom times
// the peak: a job whose batches are a large share of its peak (few workers, big batches, or many
// at once) keeps the most, one of many small batches the least.
inline constexpr std::uint64_t kLearnedBursts = 1;
inline constexpr double kLearnedMinHeadroom = 1.15;
// A learned calibration is one run's peak, and a job's peak moves between runs: up to 1.54x its
// lowest over 41 drawn jobs and 1,048 runs (bench/guard/peak_spread.py, bench/GUARD-FUZZ.md). Under a
// guard the tight headroom above is safe, since the guard grows what a later run needs; without one
// (SizingRequest::guarded false) a learned plan keeps this headroom over the peak, or the plan the
// profile gives without its calibration when that lies between (it already covered the peak).
inline constexpr double kUnguardedLearnedHeadroom = 1.55;

// The headroom a plan scaled from `calibration` keeps at least: 1 + kLearnedBursts x burst / peak
// within [kLearnedMinHeadroom, kCalibratedHeadroom] when it has a burst, else kCalibratedHeadroom.
double calibrated_headroom(const Calibration& calibration);

// PyTorch's DataLoader worker count for `ranks` loaders on `cpus` CPUs:
// max(1, cpus / ranks), bounded by batch_size / 8 + 4.
std::uint64_t recommend_workers(unsigned cpus, unsigned ranks, std::uint64_t batch_size);

// Bytes of one receive segment of NCCL's SHM transport for `spec`'s buffer sizes, and the NCCL
// term for `ranks` ranks on one node (docs/ARCHITECTURE.md, "The sizing model": the NCCL term).
std::uint64_t nccl_recv_segment(const NcclSpec& spec);
NcclPlan plan_nccl(const Profile& profile, unsigned ranks);

// Batches a loader keeps in /dev/shm beyond its prefetch_factor x workers outstanding ones, and
// why: 0 when PyTorch's pin thread copies each batch out (pin_memory with CUDA in the container),
// else 2 (the loop's batch and the previous one). The one place that decides it.
struct LoaderHold {
  std::uint64_t batches = 0;
  std::string why;
};
LoaderHold loader_hold(bool pin_memory, unsigned gpus, GpuReach reach, const std::string& reach_why = {});

// The /dev/shm pages of one DataLoader's multiprocessing semaphores with `workers` workers.
std::uint64_t loader_semaphore_bytes(std::uint64_t workers);

// Applies the model of docs/ARCHITECTURE.md ("The sizing model"). Pure: same inputs, same plan.
ShmPlan plan_shm(const Profile& profile, const SizingRequest& request);

// A refusal of `kind` for `size` (the need or the size to apply), with the plan's numbers.
Refusal plan_refusal(const ShmPlan& plan, RefusalKind kind, std::uint64_t size);

// Throws Error (exit 2) with the plan's refusal in `words` when the plan cannot be applied.
void require_fits(const ShmPlan& plan, const RequestWords& words = kContainerWords);

// A breakdown a person can read, several lines; a refusal in `words`.
std::string explain(const ShmPlan& plan, const RequestWords& words = kContainerWords);

// The same for programs.
nlohmann::json plan_to_json(const ShmPlan& plan, const RequestWords& words = kContainerWords);

}  // namespace gpurun
