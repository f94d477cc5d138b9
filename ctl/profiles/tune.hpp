#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "run_options.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl tune [gpu-run options] [--counts 0,1,2,4,8] -- [docker run options] IMAGE CMD...`:
// runs the command once per worker count ({workers} substituted, GPU_RUN_NUM_WORKERS set,
// /dev/shm planned for that count), and recommends the fastest within the shm budget.
struct TuneOptions {
  RunOptions run;
  std::optional<std::string> counts;  // default 0,1,2,4,8 up to the CPUs
  bool json = false;
};

// One worker count's run.
struct TuneResult {
  std::uint64_t workers = 0;
  std::uint64_t planned_shm = 0;  // the budget: what the container got
  bool ran = false;
  int exit_code = -1;
  double wall_s = 0;
  std::uint64_t peak_shm = 0;
  std::uint64_t samples = 0;
  std::string problem;  // why it did not run or failed, one line

  bool ok() const { return ran && exit_code == 0; }
  bool within_budget() const { return peak_shm <= planned_shm; }
};

// True when some argument holds "{workers}".
bool has_workers_placeholder(const std::vector<std::string>& args);

// Every "{workers}" in every argument replaced by `n`.
std::vector<std::string> substitute_workers(const std::vector<std::string>& args, std::uint64_t n);

// "0,1,2,4" -> {0,1,2,4}. Throws Error (exit 2) naming --counts on junk, repeats or an empty list.
std::vector<std::uint64_t> parse_counts(const std::string& text);

// 0 1 2 4 8, without the counts above `cpus`.
std::vector<std::uint64_t> default_counts(unsigned cpus);

// The index of the fastest successful run within its budget, if any.
std::optional<std::size_t> recommend(const std::vector<TuneResult>& results);

// The table with a bar chart of wall times; `utf8` uses block characters, else '#'.
std::string tune_table(const std::vector<TuneResult>& results, std::optional<std::size_t> best, bool utf8);

// The recommendation line (or why there is none).
std::string tune_recommendation(const std::vector<TuneResult>& results, std::optional<std::size_t> best);

// The same for programs.
nlohmann::ordered_json tune_json(const std::vector<TuneResult>& results, std::optional<std::size_t> best);

// Runs the sweep, printing progress on stderr and the table (or --json) on stdout. Throws
// Error (exit 2) on bad input, exit 1 when no count ran successfully.
void run_tune(const TuneOptions& options);

// Registers `tune` on `app`.
void add_tune_command(CLI::App& app);

}  // namespace gpurun
