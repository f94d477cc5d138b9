#include "sizing.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "error.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

constexpr std::uint64_t kPage = 4096;

std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

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

ShmPlan plan_shm(const Profile& profile, const SizingRequest& r) {
  ShmPlan p;
  p.profile = profile.name;
  p.gpus = r.gpus;
  p.ranks = std::max(1u, r.gpus);
  p.cpus = r.cpus;
  p.batch_size = r.batch_size.value_or(profile.batch_size);
  p.prefetch_factor = r.prefetch_factor.value_or(profile.prefetch_factor);
  p.pin_memory = profile.pin_memory;
  // With pin_memory on a GPU, the pin thread copies each batch out of /dev/shm and drops the
  // shared one: only the prefetch_factor * workers outstanding batches are there. Without a
  // pin thread (no pin_memory, or no GPU: PyTorch then skips pinning) the loop's current batch
  // and the previous one are still in /dev/shm. Measured in bench/torch (bench/RESULTS.md).
  p.hold = profile.pin_memory && r.gpus > 0 ? 0 : 2;
  if (r.workers) {
    p.workers = *r.workers;
  } else if (profile.workers_per_gpu) {
    p.workers = *profile.workers_per_gpu;
  } else {
    p.workers = recommend_workers(r.cpus, p.ranks, p.batch_size);
    p.workers_auto = true;
  }
  if (profile.calibration && profile.calibration->batch_size > 0) {
    // Scale the measured cost per outstanding batch to this batch size.
    const Calibration& c = *profile.calibration;
    std::uint64_t m_ranks = std::max<std::uint64_t>(1, c.gpus);
    std::uint64_t m_hold = c.pin_memory && c.gpus > 0 ? 0 : 2;
    std::uint64_t m_slots = m_ranks * (c.workers == 0 ? 1 : c.prefetch_factor * c.workers + m_hold);
    long double per_sample = static_cast<long double>(c.peak_shm) / m_slots / c.batch_size;
    p.batch_bytes = round_up(ceil_bytes(per_sample * p.batch_size), kPage);
    p.calibrated = true;
  } else {
    for (const Field& f : profile.fields) {
      std::uint64_t n = sat_mul(p.batch_size, dtype_size(f.dtype));
      for (auto d : f.shape) n = sat_mul(n, d);
      n = round_up(n, kPage);
      p.fields.push_back({f.name, n});
      p.batch_bytes = sat_add(p.batch_bytes, n);
    }
    if (profile.sample_bytes) {
      std::uint64_t n = round_up(sat_mul(p.batch_size, *profile.sample_bytes), kPage);
      p.fields.push_back({"sample", n});
      p.batch_bytes = n;
    }
  }
  // With no workers the main process collates into ordinary memory: nothing goes to /dev/shm.
  std::uint64_t slots = p.workers == 0 ? 0 : sat_add(sat_mul(p.prefetch_factor, p.workers), p.hold);
  p.per_rank = sat_mul(slots, p.batch_bytes);
  p.nccl = p.ranks > 1 ? profile.nccl_reserve : 0;
  p.headroom = profile.headroom;
  p.need = round_up(scale(sat_add(sat_mul(p.ranks, p.per_rank), p.nccl), p.headroom), kMiB);
  p.min_shm = profile.min_shm;
  p.max_shm = profile.max_shm;
  p.shm = std::max(p.need, p.min_shm);
  p.memory_limit = r.memory_limit;
  p.memory_fraction_max = r.memory_fraction_max;

  // Strings, not a stream: this runs in the hook on every container start.
  if (p.need > p.max_shm) {
    p.problem = "planned /dev/shm of " + format_size(p.need) + " for profile " + p.profile + " (" +
                std::to_string(p.ranks) + " rank(s) x " + std::to_string(p.workers) + " workers x batch " +
                std::to_string(p.batch_size) + ") is above the profile's max_shm " + format_size(p.max_shm) +
                ": lower --workers or --batch-size, or raise max_shm in the profile";
  } else if (p.memory_limit) {
    const MemoryBudget budget{*p.memory_limit, p.memory_fraction_max};
    if (!budget.holds(p.shm)) {
      p.problem = "planned /dev/shm of " + format_size(p.shm) + " " + budget.over() + ": raise --memory to at least " +
                  engine_size(budget.limit_for(p.shm)) + ", or lower --workers (now " + std::to_string(p.workers) +
                  ") or --batch-size (now " + std::to_string(p.batch_size) + ")";
    }
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

void require_fits(const ShmPlan& plan) {
  if (!plan.problem.empty()) throw usage_error(plan.problem);
}

std::string explain(const ShmPlan& p) {
  std::ostringstream out;
  out << "profile " << p.profile << ": " << p.ranks << " rank(s)" << (p.gpus == 0 ? " (no GPU requested)" : "")
      << ", batch_size " << p.batch_size << ", workers " << p.workers
      << (p.workers_auto ? " (auto: " + std::to_string(p.cpus) + " CPUs / " + std::to_string(p.ranks) +
                               " rank(s), at most batch_size/8+4)"
                         : "")
      << ", prefetch_factor " << p.prefetch_factor << ", pin_memory " << (p.pin_memory ? "true" : "false") << "\n";
  if (p.calibrated) {
    out << "  batch_bytes  = " << format_size(p.batch_bytes) << " (scaled from the profile's calibration)\n";
  } else {
    out << "  batch_bytes  = " << format_size(p.batch_bytes) << " =";
    for (std::size_t i = 0; i < p.fields.size(); ++i)
      out << (i ? " +" : "") << " " << p.fields[i].name << " " << format_size(p.fields[i].bytes);
    out << " (page-rounded)\n";
  }
  if (p.workers == 0) {
    out << "  per_rank     = 0 (workers=0: batches are collated in the main process, not in /dev/shm)\n";
  } else {
    out << "  per_rank     = (prefetch_factor " << p.prefetch_factor << " x workers " << p.workers << " + hold "
        << p.hold << ") x batch_bytes = " << format_size(p.per_rank) << "\n";
  }
  out << "  nccl_reserve = " << format_size(p.nccl) << (p.ranks > 1 ? "" : " (single rank)") << "\n";
  out << "  need         = headroom " << p.headroom << " x (" << p.ranks
      << " x per_rank + nccl_reserve) = " << format_size(p.need) << "\n";
  out << "  shm          = " << format_size(p.shm);
  if (p.shm > p.need) out << " (raised to min_shm " << format_size(p.min_shm) << ")";
  out << "\n";
  if (p.memory_limit) {
    out << "  memory limit = " << format_size(*p.memory_limit) << ", shm may use at most "
        << static_cast<int>(p.memory_fraction_max * 100 + 0.5) << "% of it\n";
  }
  if (!p.problem.empty()) out << "  DOES NOT FIT: " << p.problem << "\n";
  return out.str();
}

nlohmann::json plan_to_json(const ShmPlan& p) {
  nlohmann::json fields = nlohmann::json::array();
  for (const auto& f : p.fields) fields.push_back({{"name", f.name}, {"bytes", f.bytes}});
  // By topic (nlohmann::json keeps its keys sorted, so the grouping is only for the reader).
  nlohmann::json j = {{"profile", p.profile}, {"gpus", p.gpus}, {"ranks", p.ranks}, {"cpus", p.cpus}};
  j.update({{"workers", p.workers},
            {"workers_auto", p.workers_auto},
            {"batch_size", p.batch_size},
            {"prefetch_factor", p.prefetch_factor},
            {"pin_memory", p.pin_memory},
            {"hold", p.hold}});
  j.update({{"fields", fields},
            {"calibrated", p.calibrated},
            {"batch_bytes", p.batch_bytes},
            {"per_rank_bytes", p.per_rank},
            {"nccl_bytes", p.nccl},
            {"headroom", p.headroom}});
  j.update({{"need_bytes", p.need},
            {"shm_bytes", p.shm},
            {"shm", engine_size(p.shm)},
            {"min_shm_bytes", p.min_shm},
            {"max_shm_bytes", p.max_shm},
            {"fits", p.problem.empty()}});
  j["memory_limit_bytes"] = p.memory_limit ? nlohmann::json(*p.memory_limit) : nlohmann::json(nullptr);
  if (!p.problem.empty()) j["problem"] = p.problem;
  return j;
}

}  // namespace gpurun
