#include "ctl/watch.hpp"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/stop_signal.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "oci/container.hpp"
#include "shm/timeline.hpp"

namespace gpurun {
namespace {

double rounded(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

std::string watch_bar_line(const ShmUsage& u, std::uint64_t peak, double seconds, unsigned width) {
  const double fraction = u.size ? std::min(1.0, static_cast<double>(u.used) / static_cast<double>(u.size)) : 0.0;
  const double peak_fraction = u.size ? std::min(1.0, static_cast<double>(peak) / static_cast<double>(u.size)) : 0.0;
  const auto filled = static_cast<unsigned>(std::lround(fraction * width));
  // The peak is marked with '|' when it is beyond the current fill.
  const auto peak_at = static_cast<unsigned>(std::lround(peak_fraction * width));
  std::string bar = "[";
  for (unsigned i = 0; i < width; ++i) bar += i < filled ? '#' : (peak_at > filled && i + 1 == peak_at ? '|' : '.');
  bar += "]";
  char pct[16];
  std::snprintf(pct, sizeof pct, "%5.1f%%", fraction * 100);
  char t[32];
  std::snprintf(t, sizeof t, "%.1fs", seconds);
  return bar + " " + format_size(u.used) + " / " + format_size(u.size) + " " + pct + "  peak " + format_size(peak) +
         "  " + t;
}

std::string watch_sample_json(double seconds, const ShmUsage& u, std::uint64_t peak) {
  nlohmann::ordered_json j;
  j["event"] = "sample";
  j["t"] = rounded(seconds, 4);
  j["used"] = u.used;
  j["size"] = u.size;
  j["peak"] = peak;
  return j.dump();
}

nlohmann::ordered_json watch_summary_json(const std::string& container, const ShmSampleStats& s, bool exited) {
  nlohmann::ordered_json j;
  j["event"] = "summary";
  j["container"] = container;
  j["exited"] = exited;
  j["peak"] = s.peak;
  j["size"] = s.size;
  j["peak_fraction"] = s.size ? rounded(static_cast<double>(s.peak) / static_cast<double>(s.size), 4) : 0.0;
  j["samples"] = s.samples;
  j["duration_s"] = rounded(s.seconds, 3);
  j["rate_hz"] = s.seconds > 0 ? rounded(static_cast<double>(s.samples - 1) / s.seconds, 1) : 0.0;
  return j;
}

std::string watch_decision_line(const DecisionRecord& r) {
  std::string line = (r.door.empty() ? std::string("a door") : r.door) + " sized it " +
                     (r.size ? format_size(*r.size) : std::string("(no size: the host's /dev/shm)"));
  if (!r.profile.empty()) line += " (profile " + r.profile + ")";
  line += r.ceiling ? "; the guard may grow it to " + format_size(r.ceiling) : std::string("; no ceiling recorded");
  return line;
}

std::string watch_summary_text(const std::string& container, const ShmSampleStats& s, bool exited) {
  char line[256];
  const double pct = s.size ? 100.0 * static_cast<double>(s.peak) / static_cast<double>(s.size) : 0.0;
  const double rate = s.seconds > 0 ? static_cast<double>(s.samples - 1) / s.seconds : 0.0;
  std::snprintf(line, sizeof line, "%s: peak /dev/shm %s of %s (%.1f%%), %llu samples in %.1fs (%.0f/s)",
                exited ? "exited" : "stopped watching (still running)", format_size(s.peak).c_str(),
                format_size(s.size).c_str(), pct, static_cast<unsigned long long>(s.samples), s.seconds, rate);
  return "container " + container + " " + line;
}

void run_watch(const WatchOptions& o) {
  const std::uint64_t interval = parse_count(o.interval_ms, "--interval", 60000);
  if (interval == 0) throw usage_error("--interval 0: expected milliseconds between samples, 1 to 60000");
  const ContainerInfo info =
      inspect_running(o.engine, load_ctl_config(), o.container, "watch follows a running container");
  const std::string name = info.name.empty() ? o.container : info.name;
  // What a door recorded, said once before the samples (on stderr: stdout is the samples).
  if (const Recorded recorded = read_recorded(info); recorded.record)
    std::fprintf(stderr, "gpu-run-ctl: watch: %s\n", watch_decision_line(*recorded.record).c_str());
  else if (!recorded.error.empty())
    std::fprintf(stderr, "gpu-run-ctl: watch: %s\n", recorded.error.c_str());
  const bool terminal = !o.json && ::isatty(STDOUT_FILENO);

  StopOnSignal stop_guard;
  SamplerOptions so;
  so.interval = std::chrono::milliseconds(interval);
  so.stop = [] { return stop_requested(); };
  double last_draw = -1;
  std::uint64_t drawn_peak = 0;
  Timeline timeline;
  so.on_sample = [&](const ShmUsage& u, const ShmSampleStats& s) {
    if (o.timeline) timeline.add(s.seconds, u.size, u.used);
    if (terminal) {
      // At most 20 redraws a second (and on a new peak): the terminal need not keep up with 100 Hz.
      if (s.seconds - last_draw < 0.05 && s.peak == drawn_peak) return;
      last_draw = s.seconds;
      drawn_peak = s.peak;
      std::printf("\r\033[K%s", watch_bar_line(u, s.peak, s.seconds).c_str());
    } else {
      std::printf("%s\n", watch_sample_json(s.seconds, u, s.peak).c_str());
    }
    std::fflush(stdout);
  };
  const ShmSampleStats stats = sample_shm_of_pid(info.pid, so);
  const bool exited = stats.gone;
  if (terminal)
    std::printf("\r\033[K%s\n", watch_summary_text(name, stats, exited).c_str());
  else
    std::printf("%s\n", watch_summary_json(name, stats, exited).dump().c_str());
  std::fflush(stdout);
  if (o.timeline) {
    write_timeline_svg(*o.timeline, timeline.points(), "/dev/shm of container " + name);
    std::fprintf(stderr, "gpu-run-ctl: timeline of /dev/shm in %s\n", o.timeline->c_str());
  }
  if (!exited) throw Error("watch: interrupted; container " + name + " is still running", 0, 128 + SIGINT);
}

void add_watch_command(CLI::App& app) {
  auto o = std::make_shared<WatchOptions>();
  CLI::App* cmd =
      app.add_subcommand("watch", "Live /dev/shm use of a running container (used/size, peak) until it exits");
  cmd->footer(
      "On a terminal the bar is redrawn in place; otherwise (or with --json) one JSON line per sample.\n"
      "Ends with a summary (peak, size, samples, duration) when the container exits. Sampling is a statvfs\n"
      "through /proc/PID/root (no process per sample), so 100 samples a second catch short peaks. Needs root.");
  cmd->add_option("CONTAINER", o->container, "Container name or id")->required();
  cmd->add_option("--engine", o->engine, "docker or podman (default: the config's engine)")->type_name("ENGINE");
  cmd->add_option("--interval", o->interval_ms, "Milliseconds between samples")->type_name("MS")->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON line per sample, even on a terminal");
  cmd->add_option("--timeline", o->timeline,
                  "Also draw /dev/shm size and use over time as an SVG, the peak marked (written when watching ends)")
      ->type_name("FILE.svg");
  cmd->callback([o] { run_watch(*o); });
}

}  // namespace gpurun
