#include "decision/sizing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "base/units.hpp"

namespace gpurun {
namespace {

constexpr std::uint64_t kPage = 4096;
// sizeof(struct ncclSendMem) and sizeof(struct ncclRecvMem): unions padded to MEM_ALIGN (NCCL's
// src/include/comm.h).
constexpr std::uint64_t kNcclMemAlign = 4096;
// Without a pin thread the loop's batch and the previous one stay in /dev/shm (bench/torch/NOTES.md).
constexpr std::uint64_t kHoldWithoutPinThread = 2;
// The training loop may keep the previous batch besides its own (for logging, `prev = batch` at a
// step's end): a loader whose workers start mid-step find two of its batches mapped.
constexpr std::uint64_t kTrainingLoopBatches = 2;
// The need is rounded up to this, not to 1 MiB: bench/torch's smallest jobs need under 1 MiB
// (mnist r1 w1: 452 KiB), where a MiB would be over twice the need.
constexpr std::uint64_t kNeedAlign = 64 * 1024;

// ceil(v) in bytes, saturating: converting a value past UINT64_MAX is undefined behaviour.
std::uint64_t ceil_bytes(long double v) {
  if (!(v < 18446744073709551615.0L)) return UINT64_MAX;
  if (v <= 0) return 0;
  return static_cast<std::uint64_t>(std::ceil(v));
}

std::uint64_t scale(std::uint64_t bytes, double factor) { return ceil_bytes(static_cast<long double>(bytes) * factor); }

}  // namespace

std::uint64_t recommend_workers(unsigned cpus, unsigned ranks, std::uint64_t batch_size) {
  std::uint64_t per_rank = std::max<std::uint64_t>(1, cpus / std::max(1u, ranks));
  return std::min<std::uint64_t>(per_rank, batch_size / 8 + 4);
}

LoaderHold loader_hold(bool pin_memory, unsigned gpus, GpuReach reach, const std::string& reach_why) {
  // torch 1.13 dataloader.py, _MultiProcessingDataLoaderIter: `_pin_memory = loader.pin_memory and
  // torch.cuda.is_available()`; without it no pin thread runs and the loop gets the shared batch.
  if (!pin_memory)
    return {kHoldWithoutPinThread, "no pin_memory: the loop's batch and the previous one stay in /dev/shm"};
  if (gpus == 0) return {kHoldWithoutPinThread, "pin_memory without a GPU: PyTorch pins only when CUDA is available"};
  const std::string by = reach_why.empty() ? "" : " (" + reach_why + ")";
  switch (reach) {
    case GpuReach::none:
      return {kHoldWithoutPinThread,
              "pin_memory, but no GPU reaches the container" + by +
                  ": PyTorch pins only when CUDA is available, so it holds batches as without it"};
    case GpuReach::some:
      return {0, "pin_memory with a GPU in the container" + by + ": the pin thread copies each batch out"};
    case GpuReach::unknown:
      break;
  }
  return {0, "pin_memory with " + std::to_string(gpus) +
                 " GPU(s) requested, assumed to reach the container: the pin thread copies each batch out (without "
                 "a GPU in it PyTorch does not pin and the hold is 2)"};
}

std::uint64_t loader_semaphore_bytes(std::uint64_t workers) {
  // Each multiprocessing lock, semaphore and queue of a DataLoader is a glibc sem_open file of one
  // page on /dev/shm. torch 1.13 creates per loader a result queue (3: Queue's _rlock, _wlock and
  // _sem) and a workers-done Event (5: Condition's lock, sleeping, woken and wait semaphores, and the
  // flag), per worker an index queue (3): 8 + 3 x workers. Measured in bench/torch (pages above the
  // batches): 11-15 with 1 worker, 25-29 with 4, so 8 + 5 x workers pages bounds both.
  if (workers == 0) return 0;
  return sat_mul(sat_add(8, sat_mul(5, workers)), kPage);
}

std::uint64_t nccl_recv_segment(const NcclSpec& s) {
  // NCCL's SHM transport (src/transport/shm.cc, shmRecvSetup, default NCCL_SHM_LOCALITY=2): one
  // segment per receive connection, sizeof(struct ncclRecvMem) (a union padded to MEM_ALIGN = 4096,
  // src/include/comm.h) plus the buffers of the three protocols, buffSizes[LL, LL128, Simple]
  // (src/init.cc computeBuffSizes: NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE).
  // With the defaults 4096 + 524,288 + 4,915,200 + 4,194,304 = 9,637,888 bytes, the size NCCL
  // prints when it cannot create one (NVIDIA/nccl#1518, pytorch/ci-infra#490).
  return round_up(sat_add(sat_add(kNcclMemAlign, s.ll_buffsize), sat_add(s.ll128_buffsize, s.buffsize)), kPage);
}

// Receive connections per rank and channel: each rank receives from its ring predecessor, and
// the tree (a chain inside a node) adds its successor (src/graph/connect.cc, src/init.cc
// ncclTransportP2pConnect for ring and tree); with two ranks both are the same peer.
namespace {
std::uint64_t nccl_peers(std::uint64_t ranks) { return ranks == 2 ? 1 : 2; }
}  // namespace

NcclPlan plan_nccl(const Profile& profile, unsigned ranks) {
  NcclPlan n;
  if (ranks < 2) {
    n.source = "single rank";
    return n;
  }
  if (!profile.nccl) {
    n.source = "nccl_reserve";
    n.bytes = profile.nccl_reserve;
    return n;
  }
  const NcclSpec& s = *profile.nccl;
  n.transport = s.transport;
  if (s.measured) {
    n.source = "measured";
    n.bytes = *s.measured;
    if (s.measured_ranks && *s.measured_ranks >= 2 && *s.measured_ranks != ranks) {
      // NCCL's segments scale with its connections: ranks x peers per channel (below).
      n.measured_ranks = *s.measured_ranks;
      const long double per_connection =
          static_cast<long double>(*s.measured) / (n.measured_ranks * nccl_peers(n.measured_ranks));
      n.bytes = round_up(ceil_bytes(per_connection * ranks * nccl_peers(ranks)), kPage);
    }
    return n;
  }
  n.source = "nccl";
  n.host_mem = s.host_mem;
  // p2p: buffers in GPU memory (src/transport/p2p.cc); none: NCCL_SHM_DISABLE=1 and no P2P, so
  // sockets. Neither puts a segment per peer on /dev/shm. Nor does the SHM transport with cuMem
  // host memory: ncclShmAllocateShareableBuffer (src/transport/shm.cc) takes ncclCuMemHostAlloc
  // instead of ncclShmOpen when ncclCuMemEnable() && ncclCuMemHostEnable() (src/misc/cudawrap.cc:
  // NCCL_CUMEM_HOST_ENABLE, NCCL 2.23+ with CUDA 12.2+, on by default from 2.24 with a 12.6 driver).
  if (s.transport != "shm" || s.host_mem == "cumem") return n;
  // Per channel each rank receives from `peers` ranks (nccl_peers). The sender side opens
  // sizeof(struct ncclSendMem) = 4096 (shmSendSetup).
  n.channels = s.channels;
  n.peers = nccl_peers(ranks);
  n.recv_segment = nccl_recv_segment(s);
  n.send_segment = kNcclMemAlign;
  n.bytes = sat_mul(sat_mul(sat_mul(ranks, n.channels), n.peers), sat_add(n.recv_segment, n.send_segment));
  return n;
}

namespace {

// A field's pages in one batch: one segment for the batch (stack), or one per sample (list), each
// page-rounded: shm_open'ed files are allocated in pages.
std::uint64_t segment_bytes(std::uint64_t sample_field_bytes, std::uint64_t batch_size, Collate collate) {
  if (collate == Collate::list)
    return sat_mul(batch_size, round_up(std::max<std::uint64_t>(1, sample_field_bytes), kPage));
  return round_up(sat_mul(batch_size, sample_field_bytes), kPage);
}

void describe_batch(const std::vector<Field>& fields, const std::optional<std::uint64_t>& sample_bytes, LoaderPlan& l) {
  for (const Field& f : fields) {
    std::uint64_t n = dtype_size(f.dtype);
    for (auto d : f.shape) n = sat_mul(n, d);
    n = segment_bytes(n, l.batch_size, l.collate);
    l.fields.push_back({f.name, n});
    l.batch_bytes = sat_add(l.batch_bytes, n);
  }
  if (sample_bytes) {
    std::uint64_t n = segment_bytes(*sample_bytes, l.batch_size, l.collate);
    l.fields.push_back({"sample", n});
    l.batch_bytes = n;
  }
}

// One loader: `entry` null for the profile's single loader (its top-level keys). The request's
// (prefetch_factor x workers + hold) x batch_bytes + semaphores. With no workers the main process
// collates into ordinary memory: nothing goes to /dev/shm.
std::uint64_t loader_bytes(const LoaderPlan& l) {
  if (l.workers == 0) return 0;
  const std::uint64_t slots = sat_add(sat_mul(l.prefetch_factor, l.workers), l.hold);
  return sat_add(sat_mul(slots, l.batch_bytes), l.sem_bytes);
}

// workers, batch size and prefetch factor set the first loader only.
LoaderPlan plan_loader(const Profile& profile, const Loader* entry, bool first, const SizingRequest& r,
                       unsigned ranks) {
  static const Loader kTopLevel;
  const Loader& e = entry ? *entry : kTopLevel;
  LoaderPlan l;
  l.name = entry ? e.name : "loader";
  l.batch_size = first && r.batch_size ? *r.batch_size : e.batch_size.value_or(profile.batch_size);
  l.prefetch_factor =
      first && r.prefetch_factor ? *r.prefetch_factor : e.prefetch_factor.value_or(profile.prefetch_factor);
  l.pin_memory = e.pin_memory.value_or(profile.pin_memory);
  l.persistent_workers = e.persistent_workers;
  l.collate = e.collate.value_or(profile.collate);
  l.order = e.order;
  // With pin_memory on a GPU, the pin thread copies each batch out of /dev/shm and drops the
  // shared one: only the prefetch_factor * workers outstanding batches are there. Without a
  // pin thread (no pin_memory, or no GPU: PyTorch then skips pinning) the loop's current batch
  // and the previous one are still in /dev/shm. Measured in bench/torch (bench/RESULTS.md).
  const LoaderHold hold = loader_hold(l.pin_memory, r.gpus, r.gpu_reach, r.gpu_reach_why);
  l.hold = hold.batches;
  l.hold_why = hold.why;
  l.pin_thread = hold.batches == 0;
  if (first && r.workers) {
    l.workers = *r.workers;
  } else if (e.workers) {
    l.workers = *e.workers;
  } else if (!e.workers_auto && profile.workers_per_gpu) {
    l.workers = *profile.workers_per_gpu;
  } else {
    l.workers = recommend_workers(r.cpus, ranks, l.batch_size);
    l.workers_auto = true;
  }
  const bool own_samples = !e.fields.empty() || e.sample_bytes;
  if (first && !own_samples && profile.calibration && profile.calibration->batch_size > 0) {
    // Scale the measured cost per outstanding batch to this batch size.
    const Calibration& c = *profile.calibration;
    std::uint64_t m_ranks = std::max<std::uint64_t>(1, c.gpus);
    // The same batches a plan of the measured job counts for one loader (loader_hold, and the last
    // batch of a pass its next workers keep without persistent_workers).
    std::uint64_t m_hold = c.pin_memory && c.gpus > 0 ? 0 : kHoldWithoutPinThread + (e.persistent_workers ? 0 : 1);
    std::uint64_t m_slots = m_ranks * (c.workers == 0 ? 1 : c.prefetch_factor * c.workers + m_hold);
    long double per_sample = static_cast<long double>(c.peak_shm) / m_slots / c.batch_size;
    l.batch_bytes = round_up(ceil_bytes(per_sample * l.batch_size), kPage);
    l.calibrated = true;
  } else if (own_samples) {
    describe_batch(e.fields, e.sample_bytes, l);
  } else {
    describe_batch(profile.fields, profile.sample_bytes, l);
  }
  // A calibrated peak already holds the semaphores.
  l.sem_bytes = l.calibrated ? 0 : loader_semaphore_bytes(l.workers);
  l.bytes = loader_bytes(l);
  return l;
}

// A DataLoader's workers are forked from the training process (multiprocessing's default start
// method on Linux), so they inherit its mappings: every shared-memory batch the process has mapped
// when a loader starts its workers stays allocated while those workers live, after the process has
// dropped it (torch 1.13 MapAllocator maps with MAP_SHARED and keeps the fd, and nothing unmaps it
// in the child; bench/torch/inherit.py measures it, bench/torch/NOTES.md "Sizing v5"). What that
// keeps beyond a loader's own count, with the loop shapes bench/torch/fuzz draws:
//  - a loader without persistent_workers starts workers at every pass, while the loop variable of
//    its previous pass still holds that pass's last batch: +1 batch of its own for the whole pass;
//  - workers that outlive the other loops' batches (persistent_workers, started once, or the first
//    loader's: the training loop, whose epoch spans the other passes) keep what the process held of
//    each other loader when they started: the loop's batches (two of the training loop's, its own
//    and a previous one kept for logging; one of another loop's), and of a loader whose iterator is
//    alive then (persistent, or the training loader) the batches it received out of order and holds
//    for later (`_task_info`: at most prefetch_factor x workers - 1); of a loader with a pin thread,
//    whose batches the loop never holds, the one the thread is copying.
// A loader ordered last runs one pass after the others' last: no worker starts after its batches
// exist, and its own workers start once, keeping what the others left (their residue, counted
// apart in plan_shm). A loader ordered first starts its workers once, before any other loader's
// batch exists: they keep none, and no later pass of its own starts new ones.
void add_inherited_batches(std::vector<LoaderPlan>& loaders) {
  for (std::size_t i = 0; i < loaders.size(); ++i) {
    LoaderPlan& l = loaders[i];
    if (l.workers == 0) continue;
    if (l.last()) {
      l.hold_why +=
          "; ordered last: one pass after the other loaders' last, so no other loader's workers keep its "
          "batches and no new workers of its own keep a previous pass's";
      continue;
    }
    const bool once = l.order == LoaderOrder::first;
    const std::uint64_t own = !l.pin_thread && !l.persistent_workers && !once ? 1 : 0;
    const std::uint64_t held = i == 0 ? kTrainingLoopBatches : 1;
    const bool alive = l.persistent_workers || i == 0;
    const std::uint64_t waiting = alive ? sat_mul(l.prefetch_factor, l.workers) - 1 : 0;
    const std::uint64_t per_starter = l.pin_thread ? 1 : sat_add(held, waiting);
    std::uint64_t kept = 0;
    std::string by;
    for (std::size_t j = 0; j < loaders.size(); ++j) {
      const LoaderPlan& o = loaders[j];
      if (j == i || o.workers == 0 || o.order != LoaderOrder::any || !(o.persistent_workers || j == 0)) continue;
      kept = sat_add(kept, per_starter);
      by += (by.empty() ? "" : ", ") + o.name;
    }
    if (once) l.hold_why += "; ordered first: its workers start once, before the other loaders' batches exist";
    if (own) {
      l.hold_why +=
          "; +1: without persistent_workers each pass starts new workers while the loop variable still "
          "holds the last pass's last batch, and they keep it mapped";
    }
    if (kept) {
      std::string what = "the batch its pin thread copies";
      if (!l.pin_thread) {
        what = "the loop's " + std::to_string(held) + " batch" + (held > 1 ? "es" : "");
        if (waiting) what += " and the " + std::to_string(waiting) + " received out of order";
      }
      l.hold_why +=
          "; +" + std::to_string(kept) + ": " + what + " when the workers of " + by + " start stay mapped in them";
    }
    l.hold = sat_add(l.hold, sat_add(own, kept));
    l.bytes = loader_bytes(l);
  }
}

// /dev/shm per rank. Every loader not ordered last is alive at once (a validation loader mid-epoch
// next to the training loader's prefetched batches; persistent workers keep theirs between passes),
// so their bounds add up. A loader ordered last runs after them, beside what they leave: the
// residue of each (LoaderPlan::residue). The plan takes the larger phase.
void add_per_rank(ShmPlan& p) {
  std::uint64_t before = 0, residues = 0, last = 0;
  bool any_last = false;
  for (LoaderPlan& l : p.loaders) {
    if (l.last()) {
      any_last = true;
      last = sat_add(last, l.bytes);
      continue;
    }
    before = sat_add(before, l.bytes);
    if (l.workers == 0) continue;
    l.residue = l.persistent_workers ? l.bytes : sat_add(sat_mul(l.hold, l.batch_bytes), l.sem_bytes);
    residues = sat_add(residues, l.residue);
  }
  if (!any_last) {
    p.per_rank = before;
    return;
  }
  p.per_rank_before_last = before;
  p.per_rank_last = sat_add(residues, last);
  p.per_rank = std::max(before, p.per_rank_last);
}

// A learned plan's headroom where no guard runs (kUnguardedLearnedHeadroom): the plan the profile
// gives without its calibration, when it covers the learned one (its model already held the
// peak), else the wide headroom; never below `tight`.
double unguarded_headroom(const Profile& profile, const SizingRequest& r, std::uint64_t base, double tight) {
  if (base == 0) return tight;
  Profile unlearned = profile;
  unlearned.calibration.reset();
  const long double model = static_cast<long double>(plan_shm(unlearned, r).need) / base;
  const double h = model >= tight ? static_cast<double>(std::min<long double>(model, kUnguardedLearnedHeadroom))
                                  : kUnguardedLearnedHeadroom;
  return std::max(h, tight);
}

}  // namespace

double calibrated_headroom(const Calibration& c) {
  if (!c.burst_shm || c.peak_shm == 0) return kCalibratedHeadroom;
  const double margin =
      1.0 + static_cast<double>(kLearnedBursts) * static_cast<double>(*c.burst_shm) / static_cast<double>(c.peak_shm);
  return std::clamp(margin, kLearnedMinHeadroom, kCalibratedHeadroom);
}

ShmPlan plan_shm(const Profile& profile, const SizingRequest& r) {
  ShmPlan p;
  p.profile = profile.name;
  p.gpus = r.gpus;
  p.ranks = std::max(1u, r.gpus);
  p.cpus = r.cpus;
  if (profile.loaders.empty()) {
    p.loaders.push_back(plan_loader(profile, nullptr, true, r, p.ranks));
  } else {
    for (std::size_t i = 0; i < profile.loaders.size(); ++i)
      p.loaders.push_back(plan_loader(profile, &profile.loaders[i], i == 0, r, p.ranks));
  }
  add_inherited_batches(p.loaders);
  add_per_rank(p);
  const LoaderPlan& main = p.loaders.front();
  p.workers = main.workers;
  p.workers_auto = main.workers_auto;
  p.batch_size = main.batch_size;
  p.prefetch_factor = main.prefetch_factor;
  p.pin_memory = main.pin_memory;
  p.hold = main.hold;
  p.hold_why = main.hold_why;
  p.fields = main.fields;
  p.calibrated = main.calibrated;
  p.batch_bytes = main.batch_bytes;
  p.nccl_plan = plan_nccl(profile, p.ranks);
  p.nccl = p.nccl_plan.bytes;
  p.headroom =
      main.calibrated ? std::max(profile.headroom, calibrated_headroom(*profile.calibration)) : profile.headroom;
  if (main.calibrated && profile.calibration->burst_shm && !r.guarded) p.guarded_headroom = p.headroom;
  std::optional<LimitRaise> raise;
  if (r.limit_raised_from)
    raise = LimitRaise{*r.limit_raised_from, p.headroom, sat_add(sat_mul(p.ranks, p.per_rank), p.nccl)};
  p.engines = plan_engines(profile, p.ranks, r.memory_limit, raise);
  // The model's need to 64 KiB; the size applied to whole MiB, as engines and people write it.
  const std::uint64_t base = sat_add(sat_add(sat_mul(p.ranks, p.per_rank), p.nccl), p.engines.bytes);
  if (p.guarded_headroom) p.headroom = unguarded_headroom(profile, r, base, p.headroom);
  p.need = round_up(scale(base, p.headroom), kNeedAlign);
  p.min_shm = profile.min_shm;
  p.max_shm = profile.max_shm;
  p.shm = std::max(round_up(p.need, kMiB), p.min_shm);
  p.memory_limit = r.memory_limit;
  p.memory_fraction_max = r.memory_fraction_max;

  if (p.engines.refusal) {
    p.refusal = p.engines.refusal;
  } else if (p.need > p.max_shm) {
    p.refusal = plan_refusal(p, RefusalKind::kAboveMaxShm, p.need);
  } else if (p.memory_limit && !MemoryBudget{*p.memory_limit, p.memory_fraction_max}.holds(p.shm)) {
    p.refusal = plan_refusal(p, RefusalKind::kOverBudget, p.shm);
    p.refusal->memory_limit = *p.memory_limit;
  }
  return p;
}

std::uint64_t MemoryBudget::bytes() const {
  return static_cast<std::uint64_t>(static_cast<long double>(limit) * fraction);
}

std::uint64_t MemoryBudget::limit_for(std::uint64_t shm) const {
  return round_up(ceil_bytes(static_cast<long double>(shm) / fraction), kMiB);
}

std::string MemoryBudget::percent() const { return std::to_string(static_cast<int>(fraction * 100 + 0.5)) + "%"; }

std::string MemoryBudget::over() const {
  return "does not fit the memory limit " + format_size(limit) + " (shm pages count against it; at most " + percent() +
         " = " + format_size(bytes()) + " may be shm)";
}

Refusal plan_refusal(const ShmPlan& p, RefusalKind kind, std::uint64_t size) {
  Refusal r;
  r.kind = kind;
  r.size = size;
  r.profile = p.profile;
  r.ranks = p.ranks;
  r.workers = p.workers;
  r.batch_size = p.batch_size;
  r.need = p.need;
  r.min_shm = p.min_shm;
  r.max_shm = p.max_shm;
  r.memory_fraction_max = p.memory_fraction_max;
  return r;
}

void require_fits(const ShmPlan& plan, const RequestWords& words) {
  if (plan.refusal) throw usage_error(refusal_words(*plan.refusal, words));
}

namespace {

void explain_batch(std::ostringstream& out, const LoaderPlan& l, const char* indent) {
  if (l.calibrated) {
    out << indent << "batch_bytes  = " << format_mib(l.batch_bytes) << " (scaled from the profile's calibration)\n";
    return;
  }
  out << indent << "batch_bytes  = " << format_mib(l.batch_bytes) << " =";
  for (std::size_t i = 0; i < l.fields.size(); ++i)
    out << (i ? " +" : "") << " " << l.fields[i].name << " " << format_mib(l.fields[i].bytes);
  out << " (page-rounded)\n";
}

void explain_slots(std::ostringstream& out, const LoaderPlan& l, const char* indent, const char* label) {
  if (l.workers == 0) {
    out << indent << label << " = 0 (workers=0: no DataLoader worker, so no batch in /dev/shm)\n";
    return;
  }
  out << indent << label << " = (prefetch_factor " << l.prefetch_factor << " x workers " << l.workers << " + hold "
      << l.hold << ") x batch_bytes + semaphores " << format_mib(l.sem_bytes) << " = " << format_mib(l.bytes) << "\n";
  out << indent << "hold " << l.hold << ": " << l.hold_why << "\n";
}

// per_rank: the sum, or with a loader ordered last the two phases and the larger.
void explain_per_rank(std::ostringstream& out, const ShmPlan& p) {
  const auto terms = [&](bool last, bool residue) {
    std::string t;
    for (const LoaderPlan& l : p.loaders) {
      if (l.last() != last) continue;
      t += std::string(t.empty() ? " " : " + ") + l.name + (residue ? " residue " : " ") +
           format_mib(residue ? l.residue : l.bytes);
    }
    return t;
  };
  if (std::none_of(p.loaders.begin(), p.loaders.end(), [](const LoaderPlan& l) { return l.last(); })) {
    out << "  per_rank     =" << terms(false, false) << " = " << format_mib(p.per_rank)
        << " (every loader alive at once)\n";
    return;
  }
  out << "  before last  =" << terms(false, false) << " = " << format_mib(p.per_rank_before_last)
      << " (the loaders not ordered last, alive at once)\n";
  out << "  last         =" << terms(false, true) << " +" << terms(true, false) << " = " << format_mib(p.per_rank_last)
      << " (after the others' last pass: what they leave, all of it with persistent_workers, else hold x "
         "batch_bytes + semaphores)\n";
  out << "  per_rank     = the larger = " << format_mib(p.per_rank) << "\n";
}

void explain_nccl(std::ostringstream& out, const NcclPlan& n, unsigned ranks) {
  if (n.source == "single rank") {
    out << "  nccl         = 0 (single rank)\n";
  } else if (n.source == "nccl_reserve") {
    out << "  nccl_reserve = " << format_mib(n.bytes) << " (the profile's flat nccl_reserve)\n";
  } else if (n.source == "measured") {
    if (n.measured_ranks)
      out << "  nccl         = " << format_mib(n.bytes) << " (measured with " << n.measured_ranks
          << " ranks, the profile's nccl.measured, scaled to " << ranks << " ranks by ranks x peers " << ranks << " x "
          << nccl_peers(ranks) << " / " << n.measured_ranks << " x " << nccl_peers(n.measured_ranks) << ")\n";
    else
      out << "  nccl         = " << format_mib(n.bytes) << " (measured: the profile's nccl.measured)\n";
  } else if (n.transport != "shm") {
    out << "  nccl         = 0 (transport " << n.transport
        << ": no NCCL segment per peer in /dev/shm; the profile's nccl section)\n";
  } else if (n.host_mem == "cumem") {
    out << "  nccl         = 0 (transport shm, host_mem cumem: NCCL_CUMEM_HOST_ENABLE puts the SHM transport's "
           "buffers in cuMem host memory, src/transport/shm.cc ncclShmAllocateShareableBuffer, NCCL 2.23+ with CUDA "
           "12.2+; the profile's nccl section)\n";
  } else {
    out << "  nccl         = ranks " << ranks << " x channels " << n.channels << " x peers " << n.peers << " x (recv "
        << format_mib(n.recv_segment) << " + send " << format_mib(n.send_segment) << ") = " << format_mib(n.bytes)
        << " (transport shm: NCCL's SHM segments, src/transport/shm.cc; the profile's nccl section)\n";
  }
}

}  // namespace

std::string explain(const ShmPlan& p, const RequestWords& words) {
  std::ostringstream out;
  const LoaderPlan& main = p.loaders.front();
  out << "profile " << p.profile << ": " << counted(p.ranks, "rank") << (p.gpus == 0 ? " (no GPU requested)" : "")
      << ", batch_size " << p.batch_size << ", workers " << p.workers
      << (p.workers_auto
              ? " (auto: " + counted(p.cpus, "CPU") + " / " + counted(p.ranks, "rank") + ", at most batch_size/8+4)"
              : "")
      << ", prefetch_factor " << p.prefetch_factor << ", pin_memory " << (p.pin_memory ? "true" : "false") << "\n";
  if (p.loaders.size() == 1) {
    if (main.workers > 0) explain_batch(out, main, "  ");
    explain_slots(out, main, "  ", "per_rank    ");
  } else {
    for (const LoaderPlan& l : p.loaders) {
      out << "  loader " << l.name << ": batch_size " << l.batch_size << ", workers " << l.workers
          << (l.workers_auto ? " (auto)" : "") << ", prefetch_factor " << l.prefetch_factor << ", pin_memory "
          << (l.pin_memory ? "true" : "false") << ", persistent_workers " << (l.persistent_workers ? "true" : "false")
          << (l.order == LoaderOrder::any ? "" : std::string(", order ") + loader_order_name(l.order)) << "\n";
      explain_batch(out, l, "    ");
      explain_slots(out, l, "    ", "bytes       ");
    }
    explain_per_rank(out, p);
  }
  explain_nccl(out, p.nccl_plan, p.ranks);
  explain_engines(out, p.engines);
  out << "  need         = headroom " << p.headroom << " x (" << p.ranks << " x per_rank + nccl"
      << (p.engines.terms.empty() ? "" : " + engines") << ") = " << format_mib(p.need)
      << (main.calibrated ? " (calibrated: headroom at least 1.25, or 1.15-1.25 from a learned burst: a sampled peak "
                            "is not a bound)"
                          : "")
      << "\n";
  if (p.guarded_headroom)
    out << "  headroom " << p.headroom << ", not " << *p.guarded_headroom
        << ": a learned peak moves between runs and no guard runs here to grow /dev/shm (start the node guard: "
           "gpu-run-ctl configure, or gpu-run --guard)\n";
  out << "  shm          = " << format_mib(p.shm);
  if (p.shm == p.min_shm && p.shm > p.need)
    out << " (raised to min_shm " << format_size(p.min_shm) << ")";
  else if (p.shm > p.need)
    out << " (the need rounded up to whole MiB)";
  out << "\n";
  if (p.memory_limit) {
    out << "  memory limit = " << format_size(*p.memory_limit) << ", shm may use at most "
        << static_cast<int>(p.memory_fraction_max * 100 + 0.5) << "% of it\n";
  }
  if (p.refusal) out << "  DOES NOT FIT: " << refusal_words(*p.refusal, words) << "\n";
  return out.str();
}

nlohmann::json plan_to_json(const ShmPlan& p, const RequestWords& words) {
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& f : p.fields) fields.push_back({{"name", f.name}, {"bytes", f.bytes}});
  // By topic (nlohmann::json keeps its keys sorted, so the grouping is only for the reader).
  nlohmann::json j = {{"profile", p.profile}, {"gpus", p.gpus}, {"ranks", p.ranks}, {"cpus", p.cpus}};
  j.update({{"workers", p.workers},
            {"workers_auto", p.workers_auto},
            {"batch_size", p.batch_size},
            {"prefetch_factor", p.prefetch_factor},
            {"pin_memory", p.pin_memory},
            {"hold", p.hold},
            {"hold_why", p.hold_why}});
  j.update({{"fields", fields},
            {"calibrated", p.calibrated},
            {"batch_bytes", p.batch_bytes},
            {"per_rank_bytes", p.per_rank},
            {"per_rank_before_last_bytes", p.per_rank_before_last},
            {"per_rank_last_bytes", p.per_rank_last},
            {"nccl_bytes", p.nccl},
            {"headroom", p.headroom}});
  if (p.guarded_headroom) j["guarded_headroom"] = *p.guarded_headroom;
  nlohmann::json loaders = nlohmann::json::array();
  for (const LoaderPlan& l : p.loaders) {
    nlohmann::json lf = nlohmann::json::array();
    for (const auto& f : l.fields) lf.push_back({{"name", f.name}, {"bytes", f.bytes}});
    loaders.push_back({{"name", l.name},
                       {"workers", l.workers},
                       {"workers_auto", l.workers_auto},
                       {"batch_size", l.batch_size},
                       {"prefetch_factor", l.prefetch_factor},
                       {"pin_memory", l.pin_memory},
                       {"persistent_workers", l.persistent_workers},
                       {"collate", l.collate == Collate::list ? "list" : "stack"},
                       {"order", loader_order_name(l.order)},
                       {"residue_bytes", l.residue},
                       {"hold", l.hold},
                       {"hold_why", l.hold_why},
                       {"fields", lf},
                       {"calibrated", l.calibrated},
                       {"batch_bytes", l.batch_bytes},
                       {"semaphore_bytes", l.sem_bytes},
                       {"bytes", l.bytes}});
  }
  j["loaders"] = loaders;
  const NcclPlan& n = p.nccl_plan;
  j["nccl"] = {{"source", n.source},
               {"transport", n.transport},
               {"host_mem", n.host_mem},
               {"channels", n.channels},
               {"peers", n.peers},
               {"measured_ranks", n.measured_ranks},
               {"recv_segment_bytes", n.recv_segment},
               {"send_segment_bytes", n.send_segment},
               {"bytes", n.bytes}};
  j["engines"] = engines_plan_to_json(p.engines);
  j.update({{"need_bytes", p.need},
            {"shm_bytes", p.shm},
            {"shm", engine_size(p.shm)},
            {"min_shm_bytes", p.min_shm},
            {"max_shm_bytes", p.max_shm},
            {"fits", p.fits()}});
  j["memory_limit_bytes"] = p.memory_limit ? nlohmann::json(*p.memory_limit) : nlohmann::json(nullptr);
  if (p.refusal) j["problem"] = refusal_words(*p.refusal, words);
  return j;
}

}  // namespace gpurun
