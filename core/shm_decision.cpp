#include "shm_decision.hpp"

#include <cmath>

#include "contract.hpp"
#include "error.hpp"
#include "gpus.hpp"
#include "host.hpp"
#include "log.hpp"
#include "units.hpp"

namespace gpurun {
namespace {

// Where each request key lands in a ContainerRequest.
std::optional<std::string> ContainerRequest::*field_of(RequestKey key) {
  switch (key) {
    case RequestKey::kProfile:
      return &ContainerRequest::profile;
    case RequestKey::kGpus:
      return &ContainerRequest::gpus;
    case RequestKey::kWorkers:
      return &ContainerRequest::workers;
    case RequestKey::kBatchSize:
      return &ContainerRequest::batch_size;
    case RequestKey::kShmSize:
      return &ContainerRequest::shm_size;
  }
  return &ContainerRequest::profile;  // unreachable
}

const std::string* lookup(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? nullptr : &it->second;
}

void add_source(std::string& source, const char* what) {
  if (source.find(what) != std::string::npos) return;
  source += source.empty() ? what : std::string("+") + what;
}

void check_length(const std::string& name, const std::string& value) {
  if (value.size() > kMaxAnnotationBytes)
    throw Error(name + ": value of " + std::to_string(value.size()) + " bytes is too long");
}

}  // namespace

ContainerRequest container_request(const std::map<std::string, std::string>& state_annotations, const SpecFacts& spec) {
  ContainerRequest r;
  for (const RequestKeySpec& k : kRequestKeys) {
    const std::string* v = lookup(state_annotations, k.annotation);
    if (!v) v = lookup(spec.annotations, k.annotation);
    if (v) {
      r.*field_of(k.key) = *v;
      add_source(r.source, "annotation");
    } else if ((v = lookup(spec.env, k.env))) {
      r.*field_of(k.key) = *v;
      add_source(r.source, "env");
    }
  }
  if (!r.shm_size) {
    const std::string* v = lookup(state_annotations, kCrioShmSizeAnnotation);
    if (!v) v = lookup(spec.annotations, kCrioShmSizeAnnotation);
    if (v) {
      r.shm_size = *v;
      add_source(r.source, "annotation");
    }
  }
  return r;
}

ShmDecision decide_shm(const ContainerRequest& request, const SpecFacts& spec, const Config& config,
                       const ProfileStore& store, const HostFacts& host) {
  ShmDecision d;
  d.explicit_request = request.named_anything();
  d.source = d.explicit_request ? request.source : "default";
  if (!d.explicit_request && !config.default_profile) {
    d.reason = "no gpu-run request and no default_profile";
    return d;
  }
  if (uses_host_shm(spec)) {
    d.host_ipc = true;
    d.reason = spec.has_ipc_namespace
                   ? "/dev/shm is bind-mounted from the host (" + spec.shm_source.value_or("").substr(0, 200) +
                         "), not from an engine's own shm: the host's is never resized"
                   : "no ipc namespace: the container uses the host's /dev/shm";
    return d;
  }
  try {
    // A pod's containers without a limit of their own: the pod's limit, which its tmpfs counts against.
    const bool pod_limit = !spec.memory_limit && spec.pod_memory_limit;
    std::optional<std::uint64_t> memory_limit = pod_limit ? spec.pod_memory_limit : spec.memory_limit;
    const double fraction = config.memory_fraction_max;
    auto check_size = [&](std::uint64_t size, const std::string& what) {
      if (size < kMiB) throw Error(what + " " + format_size(size) + " is below 1MiB");
      if (host.mem_total > 0 && size > host.mem_total)
        throw Error(what + " " + format_size(size) + " is more than this host's memory (" +
                    format_size(host.mem_total) + ")");
      if (memory_limit) {
        const MemoryBudget budget{*memory_limit, fraction};
        if (!budget.holds(size))
          throw Error(what + " " + format_size(size) + " " + budget.over() + ": raise the " +
                      (pod_limit ? "pod's " : "") + "memory limit to at least " + engine_size(budget.limit_for(size)) +
                      " or ask for less");
      }
    };
    if (request.shm_size) {
      check_length("shm-size", *request.shm_size);
      d.size = parse_size(*request.shm_size, "shm-size");
      check_size(d.size, "shm-size");
      // An app container of a pod shares the pod's /dev/shm: it may grow it, never shrink it.
      d.size_explicit = !is_pod_app_container(spec.annotations);
      d.act = true;
      d.reason = d.size_explicit ? "explicit size" : "explicit size, grow only (the pod's /dev/shm is shared)";
      return d;
    }
    SizingRequest sr;
    if (request.gpus) {
      check_length("gpus", *request.gpus);
      sr.gpus = static_cast<unsigned>(parse_count(*request.gpus, "gpus", 1024));
    } else if (auto it = spec.env.find("NVIDIA_VISIBLE_DEVICES"); it != spec.env.end()) {
      check_length("NVIDIA_VISIBLE_DEVICES", it->second);
      auto n = count_visible_devices(it->second);
      sr.gpus = n ? *n : (spec.gpu_devices > 0 ? spec.gpu_devices : host.gpus);
    } else {
      sr.gpus = spec.gpu_devices;
    }
    if (spec.gpu_devices > 0) {
      sr.gpu_reach = GpuReach::some;
      sr.gpu_reach_why = "a GPU device in the container's spec";
    } else if (host.gpus_counted && host.gpus == 0) {
      sr.gpu_reach = GpuReach::none;
      sr.gpu_reach_why = "no /dev/nvidiaN on this host";
    }
    if (request.workers) {
      check_length("workers", *request.workers);
      sr.workers = parse_count(*request.workers, "workers", 1024);
    }
    if (request.batch_size) {
      check_length("batch-size", *request.batch_size);
      sr.batch_size = parse_count(*request.batch_size, "batch-size", 1u << 20);
      if (*sr.batch_size == 0) throw Error("batch-size: must be at least 1");
    }
    sr.cpus =
        usable_cpus(spec.cpuset_cpus.value_or(host.cpus) < host.cpus ? *spec.cpuset_cpus : host.cpus, spec.cpu_quota);
    sr.memory_limit = memory_limit;
    sr.memory_fraction_max = fraction;
    std::string name = request.profile.value_or(config.default_profile.value_or("default"));
    check_length("profile", name);
    Profile profile = store.load(name, /*allow_path=*/false);
    ShmPlan plan = plan_shm(profile, sr);
    require_fits(plan);
    check_size(plan.shm, "planned /dev/shm");
    d.profile = plan.profile;
    d.gpus = plan.gpus;
    d.workers = plan.workers;
    d.size = plan.shm;
    d.plan = plan;
    d.act = true;
    d.reason = "planned";
  } catch (const Error& e) {
    d.act = false;
    d.error = e.what();
  }
  return d;
}

std::string describe(const ShmDecision& d) {
  std::string out = "source=" + d.source;
  if (!d.profile.empty()) out += " profile=" + log_quote(d.profile);
  if (d.plan) out += " gpus=" + std::to_string(d.gpus) + " workers=" + std::to_string(d.workers);
  if (d.act) out += " size=" + engine_size(d.size);
  if (!d.error.empty())
    out += " error=" + log_quote(d.error);
  else if (!d.reason.empty())
    out += " reason=" + log_quote(d.reason);
  return out;
}

}  // namespace gpurun
