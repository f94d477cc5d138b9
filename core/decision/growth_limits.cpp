#include "decision/growth_limits.hpp"

#include <algorithm>

#include "base/units.hpp"

namespace gpurun {

GrowthCap growth_cap(const GuardLimits& limits) {
  GrowthCap cap;
  if (limits.max_shm) cap = {limits.max_shm, "the profile's max_shm " + format_size(limits.max_shm)};
  if (limits.budget_bytes && *limits.budget_bytes < cap.bytes)
    cap = {*limits.budget_bytes, "the memory budget " + format_size(*limits.budget_bytes)};
  if (limits.host_memory && limits.host_memory < cap.bytes)
    cap = {limits.host_memory, "this host's memory " + format_size(limits.host_memory)};
  if (limits.recorded_ceiling && limits.recorded_ceiling < cap.bytes)
    cap = {limits.recorded_ceiling, "the ceiling recorded when it was sized " + format_size(limits.recorded_ceiling)};
  if (limits.size_limit && limits.size_limit <= cap.bytes)
    cap = {limits.size_limit,
           "its emptyDir's sizeLimit " + format_size(limits.size_limit) + " (the kubelet evicts a pod past it)"};
  if (cap.bytes != UINT64_MAX) cap.bytes = cap.bytes / kMiB * kMiB;
  return cap;
}

std::uint64_t guard_headroom(const ShmPlan& plan) {
  if (plan.workers == 0 || plan.batch_bytes == 0) return 0;
  return plan.workers * std::max(1u, plan.ranks) * plan.batch_bytes;
}

GuardLimits guard_limits(const ShmPlan& plan) {
  GuardLimits l;
  l.headroom = guard_headroom(plan);
  if (l.headroom && plan.profile != kDefaultProfileName) {
    l.bound = plan.need;
    l.batch = plan.batch_bytes;
    for (const LoaderPlan& loader : plan.loaders) l.batch = std::max(l.batch, loader.batch_bytes);
  }
  l.max_shm = plan.max_shm;
  if (plan.memory_limit && *plan.memory_limit > 0)
    l.budget_bytes = MemoryBudget{*plan.memory_limit, plan.memory_fraction_max}.bytes();
  l.host_memory = plan.host_memory;
  return l;
}

std::uint64_t growth_ceiling(const GuardLimits& limits, std::uint64_t size) {
  const std::uint64_t cap = growth_cap(limits).bytes;
  return cap == UINT64_MAX ? size : std::max(size, cap);
}

std::uint64_t empty_dir_size_limit(std::uint64_t size, std::uint64_t max_shm, std::optional<std::uint64_t> memory_limit,
                                   double memory_fraction_max) {
  GuardLimits limits;
  limits.max_shm = max_shm;
  if (memory_limit) limits.budget_bytes = MemoryBudget{*memory_limit, memory_fraction_max}.bytes();
  return growth_ceiling(limits, size);
}

}  // namespace gpurun
