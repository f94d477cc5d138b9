#include "decision/shm_decision.hpp"

#include <cmath>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/units.hpp"
#include "decision/command_line.hpp"
#include "decision/contract.hpp"
#include "oci/gpus.hpp"
#include "oci/host.hpp"

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
    throw usage_error(name + ": value of " + std::to_string(value.size()) + " bytes is too long");
}

// The memory limit the budget holds /dev/shm to: the container's own, else its pod's (a pod's
// containers without a limit of their own: the pod's, which its tmpfs counts against).
std::optional<std::uint64_t> budget_limit(const SpecFacts& spec) {
  return spec.memory_limit ? spec.memory_limit : spec.pod_memory_limit;
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
    } else if (const EnvValue e = env_value(spec.env, k); e.value) {
      r.*field_of(k.key) = *e.value;
      add_source(r.source, "env");
      if (r.conflict.empty()) r.conflict = e.conflict;
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

ContainerRequest recorded_request(const std::map<std::string, std::string>& env,
                                  const std::map<std::string, std::string>& labels) {
  ContainerRequest r;
  r.source = "recorded";
  auto read = [&](std::optional<std::string>& field, const char* env_name, const char* label) {
    if (auto it = env.find(env_name); it != env.end() && !it->second.empty())
      field = it->second;
    else if (label)
      if (auto l = labels.find(label); l != labels.end() && !l->second.empty()) field = l->second;
  };
  read(r.profile, kEnvProfile, kLabelProfile);
  read(r.gpus, kEnvGpus, kLabelGpus);
  read(r.workers, kEnvNumWorkers, nullptr);
  if (!r.workers) read(r.workers, kEnvWorkers, nullptr);
  read(r.batch_size, kEnvBatchSize, nullptr);
  return r;
}

HostFacts node_host_facts(const HostInfo& info) {
  return HostFacts{info.cpus, count_host_gpus(), info.mem_total, /*gpus_counted=*/true, node_guard_runs()};
}

SizingRequest sizing_request(const ContainerRequest& request, const SpecFacts& spec, const HostFacts& host,
                             const Config& config) {
  const bool flags = request.origin == RequestOrigin::kFlags;
  // A key as the door that read it names it: "--workers", "workers" or "gpu-run.workers".
  const RequestWords& words = *request.words;
  auto count = [&](const std::optional<std::string>& text, const char* key, std::uint64_t min, std::uint64_t max) {
    check_length(key, *text);
    const std::uint64_t n = parse_count(*text, key, max);
    if (n < min) throw usage_error(std::string(key) + ": must be at least " + std::to_string(min));
    return n;
  };
  SizingRequest sr;
  if (request.gpus && flags) {
    check_length(words.gpus, *request.gpus);
    GpuRequest g = parse_gpu_request(*request.gpus);
    if (g.all) {
      if (host.gpus == 0)
        throw usage_error(
            "--gpus all: no /dev/nvidiaN devices on this host to count; give the number of GPUs, e.g. --gpus 2");
      g.count = host.gpus;
    }
    sr.gpus = g.count;
  } else if (request.gpus) {
    sr.gpus = static_cast<unsigned>(count(request.gpus, words.gpus, 0, 1024));
  } else if (auto it = spec.env.find("NVIDIA_VISIBLE_DEVICES"); it != spec.env.end()) {
    check_length("NVIDIA_VISIBLE_DEVICES", it->second);
    auto n = count_visible_devices(it->second);
    sr.gpus = n ? *n : (spec.gpu_devices > 0 ? spec.gpu_devices : host.gpus);
  } else {
    sr.gpus = spec.gpu_devices;
  }
  if (spec.gpu_reach != GpuReach::unknown) {
    sr.gpu_reach = spec.gpu_reach;
    sr.gpu_reach_why = spec.gpu_reach_why;
  } else if (spec.gpu_devices > 0) {
    sr.gpu_reach = GpuReach::some;
    sr.gpu_reach_why = "a GPU device in the container's spec";
  } else if (host.gpus_counted && host.gpus == 0) {
    sr.gpu_reach = GpuReach::none;
    sr.gpu_reach_why = "no /dev/nvidiaN on this host";
  }
  if (request.workers) sr.workers = count(request.workers, words.workers, 0, 1024);
  if (request.batch_size) sr.batch_size = count(request.batch_size, words.batch_size, 1, 1u << 20);
  if (request.prefetch_factor) sr.prefetch_factor = count(request.prefetch_factor, words.prefetch_factor, 1, 1024);
  sr.cpus =
      usable_cpus(spec.cpuset_cpus && *spec.cpuset_cpus < host.cpus ? *spec.cpuset_cpus : host.cpus, spec.cpu_quota);
  sr.memory_limit = budget_limit(spec);
  if (!sr.memory_limit) sr.limit_raised_from = spec.limit_raised_from;
  sr.memory_fraction_max = config.memory_fraction_max;
  sr.guarded = host.guarded;
  return sr;
}

ShmPlan plan_request(const ContainerRequest& request, const SpecFacts& spec, const Config& config,
                     const ProfileStore& store, const HostFacts& host) {
  const SizingRequest sr = sizing_request(request, spec, host, config);
  const std::string name = request.profile.value_or(config.default_profile.value_or("default"));
  const RequestWords& words = *request.words;
  check_length(words.profile, name);
  ShmPlan plan =
      plan_shm(store.load(name, /*allow_path=*/request.origin == RequestOrigin::kFlags, words.known_profiles), sr);
  plan.host_memory = host.mem_total;
  return plan;
}

ShmDecision decide_shm(const ContainerRequest& request, const SpecFacts& spec, const Config& config,
                       const ProfileStore& store, const HostFacts& host) {
  ShmDecision d;
  // A person who runs gpu-run asks for a size by running it, flags or none.
  d.explicit_request = request.named_anything() || request.origin == RequestOrigin::kFlags;
  d.source = d.explicit_request ? request.source : "default";
  if (!d.explicit_request && !config.default_profile) {
    d.reason = "no gpu-run request and no default_profile";
    return d;
  }
  // The request is read in full before the host's /dev/shm is ruled out, so that a door can
  // still show the plan; its errors count only for a /dev/shm gpu-run may size.
  std::optional<Error> error;
  try {
    d.plan = plan_request(request, spec, config, store, host);
  } catch (const Error& e) {
    // A size alone needs no plan: the default profile's is only shown beside it.
    if (request.named_plan() || !request.shm_size) error = e;
  }
  if (request.shm_size && !error) {
    const char* key = request.words->shm_size;
    try {
      check_length(key, *request.shm_size);
      d.size = parse_size(*request.shm_size, key);
    } catch (const Error& e) {
      error = e;
    }
  }
  if (!request.conflict.empty()) error = usage_error(request.conflict);
  if (const auto seen = command_worker_flag(spec.args)) {
    d.command_flag = seen->flag.substr(0, 80);
    d.command_workers = seen->workers;
  }
  if (d.plan && !request.shm_size)
    d.command_warning = command_workers_warning(request, *d.plan, spec, config, store, host);
  if (uses_host_shm(spec)) {
    d.host_ipc = true;
    d.reason = spec.has_ipc_namespace
                   ? "/dev/shm is bind-mounted from the host (" + spec.shm_source.value_or("").substr(0, 200) +
                         "), not from an engine's own shm: the host's is never resized"
                   : "no ipc namespace: the container uses the host's /dev/shm";
    d.size = 0;
    return d;
  }
  if (error) {
    d.error = std::move(error);
    d.plan.reset();
    return d;
  }
  const bool pod_limit = !spec.memory_limit && spec.pod_memory_limit;
  const std::optional<std::uint64_t> memory_limit = budget_limit(spec);
  const RequestWords& words = *request.words;
  // Why `size` cannot be given to this container, if it cannot (a refusal over the budget is kept
  // in d.refusal).
  const auto size_error = [&](std::uint64_t size, const std::string& what, bool planned) -> std::optional<Error> {
    if (size < kMiB) return usage_error(what + " " + format_size(size) + " is below 1MiB");
    if (host.mem_total > 0 && size > host.mem_total)
      return usage_error(what + " " + format_size(size) + " is more than this host's memory (" +
                         format_size(host.mem_total) + ")");
    if (!memory_limit || MemoryBudget{*memory_limit, config.memory_fraction_max}.holds(size)) return std::nullopt;
    Refusal r = d.plan ? plan_refusal(*d.plan, RefusalKind::kOverBudget, size) : Refusal{};
    r.kind = RefusalKind::kOverBudget;
    r.planned = planned;
    r.size = size;
    r.memory_limit = *memory_limit;
    r.memory_fraction_max = config.memory_fraction_max;
    r.pod_limit = pod_limit;
    d.refusal = r;
    // A size a person chose over the budget, and says so (gpu-run --over-budget): kept.
    if (!planned && request.over_budget_chosen) {
      d.budget_waived = true;
      return std::nullopt;
    }
    return usage_error(refusal_words(r, words));
  };
  const auto cannot = [&d](Error e) {
    d.act = false;
    d.size = 0;
    d.error = std::move(e);
    return d;
  };
  if (request.shm_size) {
    if (auto e = size_error(d.size, words.shm_size, false)) return cannot(std::move(*e));
    // An app container of a pod shares the pod's /dev/shm: it may grow it, never shrink it.
    d.size_explicit = !is_pod_app_container(spec.annotations);
    d.act = true;
    d.reason = d.size_explicit ? "explicit size" : "explicit size, grow only (the pod's /dev/shm is shared)";
    if (d.budget_waived) d.reason += ", over the memory budget by a person's choice";
    return d;
  }
  // The budget first (with the pod's limit named when it is the pod's), then the plan's own.
  if (auto e = size_error(d.plan->shm, "planned /dev/shm", true)) return cannot(std::move(*e));
  if (d.plan->refusal) {
    d.refusal = d.plan->refusal;
    return cannot(usage_error(refusal_words(*d.refusal, words)));
  }
  d.profile = d.plan->profile;
  d.gpus = d.plan->gpus;
  d.workers = d.plan->workers;
  d.size = d.plan->shm;
  d.act = true;
  d.planned = true;
  d.reason = "planned";
  return d;
}

std::string describe(const ShmDecision& d) {
  std::string out = "source=" + d.source;
  if (!d.profile.empty()) out += " profile=" + log_quote(d.profile);
  if (d.planned) out += " gpus=" + std::to_string(d.gpus) + " workers=" + std::to_string(d.workers);
  if (d.act) out += " size=" + engine_size(d.size);
  if (d.error)
    out += " error=" + log_quote(d.error->what());
  else if (!d.reason.empty())
    out += " reason=" + log_quote(d.reason);
  return out;
}

}  // namespace gpurun
