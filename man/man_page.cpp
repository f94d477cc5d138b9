// gpu_run_man_page: writes a man page from its template (man/*.in) at build time, filling in what
// the code defines, so the page cannot drift from it: `@DEFAULT PROGRAM [COMMAND...] --OPTION@` is
// the option's default from the program's CLI11 definition (the one --help prints), `@NAME@` a
// figure of the code (the sizing model's hold counts, the servers' connection limits), computed by
// the functions the programs call. An unknown placeholder fails the build, naming its line.
//
//   gpu_run_man_page TEMPLATE OUTPUT

#include <CLI/CLI.hpp>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ctl/commands.hpp"
#include "decision/config.hpp"
#include "decision/sizing.hpp"
#include "guard/metrics_server.hpp"
#include "pod/webhook_config.hpp"
#include "profiles/profile.hpp"
#include "webhook/cli.hpp"

namespace gpurun {
namespace {

// The hold of a one-loader job's loader as plan_shm counts it (what --explain prints).
std::uint64_t planned_hold(bool pin_memory, GpuReach reach, bool persistent_workers) {
  Profile p;
  p.name = "man";
  p.sample_bytes = 4096;
  p.batch_size = 1;
  p.workers_per_gpu = 1;
  p.prefetch_factor = 2;
  p.pin_memory = pin_memory;
  p.headroom = 1.0;
  if (persistent_workers) {
    Loader l;
    l.name = "loader";
    l.persistent_workers = true;
    p.loaders.push_back(l);
  }
  SizingRequest r;
  r.gpus = 1;
  r.gpu_reach = reach;
  return plan_shm(p, r).loaders.at(0).hold;
}

// A number as a person writes it: 0.5, 1.
std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::map<std::string, std::string> figures() {
  const std::uint64_t page = 4096;
  const std::uint64_t pinned = planned_hold(true, GpuReach::some, false);
  const std::uint64_t unpinned = planned_hold(false, GpuReach::some, false);
  const std::uint64_t unpinned_persistent = planned_hold(false, GpuReach::some, true);
  const WebhookConfig webhook;  // the webhook config's defaults
  const Config host;            // the host config's
  const NcclSpec nccl;          // a profile's nccl section's
  const std::uint64_t sem_per_worker = (loader_semaphore_bytes(2) - loader_semaphore_bytes(1)) / page;
  return {
      // Batches a loader keeps beyond prefetch_factor x workers: with PyTorch's pin thread, without it
      // (loader_hold), and a one-loader job's total without the pin thread and persistent_workers.
      {"HOLD_PIN_THREAD", std::to_string(pinned)},
      {"HOLD_NO_PIN_THREAD", std::to_string(loader_hold(false, 1, GpuReach::some).batches)},
      {"HOLD_NEW_WORKERS", std::to_string(unpinned - unpinned_persistent)},
      {"HOLD_UNPINNED", std::to_string(unpinned)},
      {"HOLD_GPU_REQUEST_NONE", std::to_string(planned_hold(true, GpuReach::none, false))},
      {"SEM_PAGES_PER_LOADER", std::to_string(loader_semaphore_bytes(1) / page - sem_per_worker)},
      {"SEM_PAGES_PER_WORKER", std::to_string(sem_per_worker)},
      {"NCCL_RECV_SEGMENT", std::to_string(nccl_recv_segment(nccl))},
      {"METRICS_MAX_CONNECTIONS", std::to_string(kMetricsMaxConnections)},
      {"METRICS_TIMEOUT_SECONDS", std::to_string(kMetricsTimeoutSeconds)},
      {"METRICS_KEEP_ALIVE_SECONDS", std::to_string(kMetricsKeepAliveSeconds)},
      {"WEBHOOK_KEEP_ALIVE_REQUESTS", std::to_string(kWebhookKeepAliveRequests)},
      {"WEBHOOK_KEEP_ALIVE_SECONDS", std::to_string(kWebhookKeepAliveSeconds)},
      {"WEBHOOK_MEMORY_FRACTION_MAX", number(webhook.memory_fraction_max)},
      {"WEBHOOK_DEFAULT_CPUS", std::to_string(webhook.default_cpus)},
      {"NCCL_CHANNELS", std::to_string(nccl.channels)},
      {"NCCL_BUFFSIZE", std::to_string(nccl.buffsize)},
      {"NCCL_LL_BUFFSIZE", std::to_string(nccl.ll_buffsize)},
      {"NCCL_LL128_BUFFSIZE", std::to_string(nccl.ll128_buffsize)},
      // The host config's defaults (gpu-run-config(5)).
      {"CONFIG_LOG_FILE", host.log_file.string()},
      {"CONFIG_MEMORY_FRACTION_MAX", number(host.memory_fraction_max)},
      {"CONFIG_GUARD_MIN_FREE_FRACTION", number(host.guard.min_free_fraction)},
      {"CONFIG_GUARD_STEP_FRACTION", number(host.guard.step_fraction)},
  };
}

// A value as troff prints it literally: '-' and '\' escaped.
std::string troff_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '-' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

struct Programs {
  WebhookOptions webhook_options;
  CLI::App ctl{"", "gpu-run-ctl"};
  CLI::App webhook;
  Programs() {
    add_ctl_commands(ctl);
    add_webhook_options(webhook, webhook_options);
  }

  // The default of "PROGRAM [COMMAND...] --OPTION"; throws std::runtime_error saying what is wrong.
  std::string option_default(const std::string& spec) {
    std::istringstream words(spec);
    std::vector<std::string> path;
    for (std::string w; words >> w;) path.push_back(w);
    if (path.size() < 2 || path.back().rfind("--", 0) != 0)
      throw std::runtime_error("expected @DEFAULT PROGRAM [COMMAND...] --OPTION@");
    CLI::App* app = path[0] == "gpu-run-ctl" ? &ctl : path[0] == "gpu-run-webhook" ? &webhook : nullptr;
    if (!app) throw std::runtime_error("no CLI11 definition of " + path[0] + " (gpu-run-ctl, gpu-run-webhook)");
    for (std::size_t i = 1; i + 1 < path.size(); ++i) {
      CLI::App* sub = nullptr;
      for (CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; }))
        if (s->get_name() == path[i]) sub = s;
      if (!sub) throw std::runtime_error(path[i] + " is not a command of " + app->get_name());
      app = sub;
    }
    const CLI::Option* option = nullptr;
    for (const CLI::Option* o : app->get_options())
      for (const std::string& name : o->get_lnames())
        if ("--" + name == path.back()) option = o;
    if (!option) throw std::runtime_error(app->get_name() + " has no option " + path.back());
    if (option->get_default_str().empty())
      throw std::runtime_error(path.back() + " has no default in its definition (capture_default_str)");
    return option->get_default_str();
  }
};

int generate(const std::string& in_path, const std::string& out_path) {
  std::ifstream in(in_path);
  if (!in) {
    std::cerr << "gpu_run_man_page: cannot read " << in_path << "\n";
    return 1;
  }
  const std::map<std::string, std::string> known = figures();
  Programs programs;
  std::ostringstream out;
  bool ok = true;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string::size_type at = 0;
    while ((at = line.find('@', at)) != std::string::npos) {
      const std::string::size_type end = line.find('@', at + 1);
      if (end == std::string::npos) break;
      const std::string key = line.substr(at + 1, end - at - 1);
      std::string value;
      try {
        if (key.rfind("DEFAULT ", 0) == 0) {
          value = troff_escape(programs.option_default(key.substr(8)));
        } else if (auto it = known.find(key); it != known.end()) {
          value = troff_escape(it->second);
        } else if (key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == std::string::npos && !key.empty()) {
          throw std::runtime_error("no such figure (man/man_page.cpp, figures(), knows them)");
        } else {
          ++at;  // an '@' of the text, such as an address
          continue;
        }
      } catch (const std::exception& e) {
        std::cerr << in_path << ":" << n << ": @" << key << "@: " << e.what() << "\n";
        ok = false;
      }
      line.replace(at, end - at + 1, value);
      at += value.size();
    }
    out << line << "\n";
  }
  if (!ok) return 1;
  std::ofstream file(out_path);
  file << out.str();
  if (!file.flush()) {
    std::cerr << "gpu_run_man_page: cannot write " << out_path << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpurun

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: gpu_run_man_page TEMPLATE OUTPUT\n";
    return 2;
  }
  return gpurun::generate(argv[1], argv[2]);
}
