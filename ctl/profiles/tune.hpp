#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ctl/run_options.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl tune [gpu-run options] [--counts 0,1,2,4,8] [--repeats N] -- [docker run options]
// IMAGE CMD...`: runs the command `repeats` times per worker count ({workers} substituted,
// GPU_RUN_WORKERS set, /dev/shm planned for that count), and recommends the fastest within
// the shm budget when it is faster by more than the runs' spread.
struct TuneOptions {
  RunOptions run;
  std::optional<std::string> counts;  // default 0,1,2,4,8 up to the CPUs
  unsigned repeats = 3;
  bool json = false;
};

// One worker count's runs.
struct TuneResult {
  std::uint64_t workers = 0;
  std::uint64_t planned_shm = 0;  // the budget: what the container got
  bool ran = false;
  int exit_code = -1;          // the first failed run's, else 0
  double wall_s = 0;           // the median of runs_s
  std::vector<double> runs_s;  // each run's wall time
  std::uint64_t peak_shm = 0;  // the highest of the runs'
  std::uint64_t samples = 0;
  std::string problem;  // why it did not run or failed, one line

  bool ok() const { return ran && exit_code == 0; }
  bool within_budget() const { return peak_shm <= planned_shm; }
  // The slowest run's time minus the fastest's (0 with one run).
  double spread_s() const;
  // Adds a run's wall time and sets wall_s to the median of the runs.
  void add_run(double wall);
};

// True when some argument holds "{workers}".
bool has_workers_placeholder(const std::vector<std::string>& args);

// Every "{workers}" in every argument replaced by `n`.
std::vector<std::string> substitute_workers(const std::vector<std::string>& args, std::uint64_t n);

// "0,1,2,4" -> {0,1,2,4}. Throws Error (exit 2) naming --counts on junk, repeats or an empty list.
std::vector<std::uint64_t> parse_counts(const std::string& text);

// 0 1 2 4 8, without the counts above `cpus`.
std::vector<std::uint64_t> default_counts(unsigned cpus);

// The successful counts within their budget whose median time the fastest's does not beat by
// more than the larger of the two counts' spreads: the fastest first, then in the given order.
// Empty when no count ran to the end within its budget.
std::vector<std::size_t> within_spread_of_fastest(const std::vector<TuneResult>& results);

// The index of the fastest successful count within its budget when it beats every other by more
// than the spread (within_spread_of_fastest holds it alone), else none.
std::optional<std::size_t> recommend(const std::vector<TuneResult>& results);

// The table with a bar chart of wall times; `utf8` uses block characters, else '#'.
std::string tune_table(const std::vector<TuneResult>& results, std::optional<std::size_t> best, bool utf8);

// The recommendation line (or why there is none: no count ran, or the fastest are within the
// spread of their runs).
std::string tune_recommendation(const std::vector<TuneResult>& results, std::optional<std::size_t> best);

// The same for programs.
nlohmann::ordered_json tune_json(const std::vector<TuneResult>& results, std::optional<std::size_t> best);

// Runs the sweep, printing progress on stderr and the table (or --json) on stdout. Throws
// Error (exit 2) on bad input, exit 1 when no count ran successfully.
void run_tune(const TuneOptions& options);

// Registers `tune` on `app`.
void add_tune_command(CLI::App& app);

}  // namespace gpurun
