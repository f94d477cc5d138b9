#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "decision/decision_record.hpp"
#include "shm/shm_sampler.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl watch CONTAINER`: live /dev/shm use of a running container until it exits.
struct WatchOptions {
  std::string container;
  std::optional<std::string> engine;  // default: the config's engine
  std::string interval_ms = "10";
  bool json = false;                    // JSON lines even on a terminal
  std::optional<std::string> timeline;  // --timeline FILE.svg: the picture, written at the end
};

// The line redrawn on a terminal: a used/size bar, the numbers and the peak.
std::string watch_bar_line(const ShmUsage& usage, std::uint64_t peak, double seconds, unsigned bar_width = 30);

// One sample as a JSON line (no newline): {"event":"sample","t":..,"used":..,"size":..,"peak":..}.
std::string watch_sample_json(double seconds, const ShmUsage& usage, std::uint64_t peak);

// The closing summary: peak, size, samples, duration, as JSON or as one line of text.
nlohmann::ordered_json watch_summary_json(const std::string& container, const ShmSampleStats& stats, bool exited);
// The line watch says first of a container a door recorded a decision for: who sized it, to
// what, and how far the guard may grow it.
std::string watch_decision_line(const DecisionRecord& record);

std::string watch_summary_text(const std::string& container, const ShmSampleStats& stats, bool exited);

// Inspects the container once, then samples its /dev/shm until it exits (or SIGINT).
// Throws Error (exit 2) naming the flag on bad input or a container that is not running.
void run_watch(const WatchOptions& options);

// Registers `watch` on `app`.
void add_watch_command(CLI::App& app);

}  // namespace gpurun
