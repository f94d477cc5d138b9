#include "ctl/profiles/tune.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "base/temp_dir.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "decision/config.hpp"
#include "engine/invocation.hpp"
#include "engine/measured_run.hpp"

namespace gpurun {
namespace {

constexpr const char* kPlaceholder = "{workers}";
constexpr int kBarWidth = 30;

bool utf8_locale() {
  for (const char* var : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* v = std::getenv(var);
    if (v && *v) {
      std::string s(v);
      return s.find("UTF-8") != std::string::npos || s.find("utf8") != std::string::npos ||
             s.find("utf-8") != std::string::npos;
    }
  }
  return false;
}

std::string last_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  if (last.size() > 160) last = last.substr(0, 157) + "...";
  return last;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string pad_right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string status_of(const TuneResult& r) {
  if (!r.ran) return "not run";
  if (r.exit_code != 0) return "exit " + std::to_string(r.exit_code);
  if (!r.within_budget()) return "over budget";
  return "ok";
}

std::string counts_text(const std::vector<TuneResult>& results, const std::vector<std::size_t>& which,
                        std::string (*item)(const TuneResult&)) {
  std::string out;
  for (std::size_t k = 0; k < which.size(); ++k) {
    if (k > 0) out += k + 1 == which.size() ? " and " : ", ";
    out += item(results[which[k]]);
  }
  return out;
}

}  // namespace

double TuneResult::spread_s() const {
  if (runs_s.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(runs_s.begin(), runs_s.end());
  return *hi - *lo;
}

void TuneResult::add_run(double wall) {
  runs_s.push_back(wall);
  std::vector<double> sorted = runs_s;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  wall_s = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

bool has_workers_placeholder(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a.find(kPlaceholder) != std::string::npos) return true;
  return false;
}

std::vector<std::string> substitute_workers(const std::vector<std::string>& args, std::uint64_t n) {
  const std::string value = std::to_string(n);
  const std::string key = kPlaceholder;
  std::vector<std::string> out;
  for (std::string a : args) {
    for (std::size_t pos = a.find(key); pos != std::string::npos; pos = a.find(key, pos + value.size()))
      a.replace(pos, key.size(), value);
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::uint64_t> parse_counts(const std::string& text) {
  std::vector<std::uint64_t> out;
  std::set<std::uint64_t> seen;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::uint64_t n;
    try {
      n = parse_count(item, "--counts", 1024);
    } catch (const Error&) {
      throw usage_error("--counts '" + text.substr(0, 60) +
                        "': expected a comma-separated list of worker counts 0..1024, e.g. 0,1,2,4");
    }
    if (!seen.insert(n).second) throw usage_error("--counts '" + text.substr(0, 60) + "': " + item + " appears twice");
    out.push_back(n);
  }
  if (out.empty() || (!text.empty() && text.back() == ','))
    throw usage_error("--counts '" + text.substr(0, 60) +
                      "': expected a comma-separated list of worker counts, e.g. 0,1,2,4");
  return out;
}

std::vector<std::uint64_t> default_counts(unsigned cpus) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t n : {0, 1, 2, 4, 8})
    if (n <= std::max(1u, cpus)) out.push_back(n);
  return out;
}

std::vector<std::size_t> within_spread_of_fastest(const std::vector<TuneResult>& results) {
  std::optional<std::size_t> fastest;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const TuneResult& r = results[i];
    if (!r.ok() || !r.within_budget()) continue;
    if (!fastest || r.wall_s < results[*fastest].wall_s) fastest = i;
  }
  if (!fastest) return {};
  const TuneResult& f = results[*fastest];
  std::vector<std::size_t> out = {*fastest};
  for (std::size_t i = 0; i < results.size(); ++i) {
    const TuneResult& r = results[i];
    if (i == *fastest || !r.ok() || !r.within_budget()) continue;
    if (r.wall_s - f.wall_s <= std::max(f.spread_s(), r.spread_s())) out.push_back(i);
  }
  return out;
}

std::optional<std::size_t> recommend(const std::vector<TuneResult>& results) {
  const std::vector<std::size_t> close = within_spread_of_fastest(results);
  if (close.size() != 1) return std::nullopt;
  return close.front();
}

std::string tune_table(const std::vector<TuneResult>& results, std::optional<std::size_t> best, bool utf8) {
  double longest = 0;
  for (const auto& r : results)
    if (r.ran) longest = std::max(longest, r.wall_s);
  std::ostringstream out;
  out << "workers  wall time  spread   peak shm  planned shm  result\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const TuneResult& r = results[i];
    out << pad_left(std::to_string(r.workers), 7) << "  " << pad_left(r.ran ? seconds_text(r.wall_s) : "-", 9) << "  "
        << pad_left(r.runs_s.size() > 1 ? seconds_text(r.spread_s()) : "-", 6) << "  "
        << pad_left(r.ran ? format_size(r.peak_shm) : "-", 9) << "  " << pad_left(format_size(r.planned_shm), 11)
        << "  " << pad_right(status_of(r) + (best && *best == i ? " *" : ""), 13);
    if (r.ran && longest > 0) {
      // Eighths of a cell, so that close times still look different.
      const long eighths = std::lround(r.wall_s / longest * kBarWidth * 8);
      std::string bar;
      if (utf8) {
        static const char* const kPartial[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
        for (long k = 0; k < eighths / 8; ++k) bar += "█";
        bar += kPartial[eighths % 8];
      } else {
        bar.assign(static_cast<std::size_t>((eighths + 4) / 8), '#');
      }
      out << bar;
    } else if (!r.problem.empty()) {
      out << r.problem;
    }
    out << "\n";
    if (r.ran && !r.problem.empty()) out << "         " << r.problem << "\n";
  }
  return out.str();
}

std::string tune_recommendation(const std::vector<TuneResult>& results, std::optional<std::size_t> best) {
  const std::vector<std::size_t> close = within_spread_of_fastest(results);
  if (close.empty()) return "no recommendation: no worker count ran to the end within its planned /dev/shm";
  if (!best) {
    double spread = 0;
    for (std::size_t i : close) spread = std::max(spread, results[i].spread_s());
    return "no recommendation: --workers " +
           counts_text(results, close, [](const TuneResult& r) { return std::to_string(r.workers); }) + " take " +
           counts_text(results, close, [](const TuneResult& r) { return seconds_text(r.wall_s); }) +
           " (medians), closer than the spread of their runs (" + seconds_text(spread) +
           "): the difference is noise; a longer job or more --repeats may tell them apart";
  }
  const TuneResult& b = results[*best];
  std::ostringstream out;
  out << "recommended: --workers " << b.workers << " (" << seconds_text(b.wall_s);
  const TuneResult* slowest = nullptr;
  for (const auto& r : results)
    if (r.ok() && (!slowest || r.wall_s > slowest->wall_s)) slowest = &r;
  if (slowest && slowest != &b && b.wall_s > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", slowest->wall_s / b.wall_s);
    out << ", " << buf << " faster than --workers " << slowest->workers;
  }
  out << "; peak /dev/shm " << format_size(b.peak_shm) << " within the planned " << format_size(b.planned_shm) << ")";
  return out.str();
}

nlohmann::ordered_json tune_json(const std::vector<TuneResult>& results, std::optional<std::size_t> best) {
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const auto& r : results) {
    nlohmann::ordered_json j;
    j["workers"] = r.workers;
    j["ran"] = r.ran;
    j["exit_status"] = r.ran ? nlohmann::ordered_json(r.exit_code) : nlohmann::ordered_json(nullptr);
    j["wall_s"] = std::round(r.wall_s * 1000) / 1000;
    j["spread_s"] = std::round(r.spread_s() * 1000) / 1000;
    nlohmann::ordered_json each = nlohmann::ordered_json::array();
    for (double w : r.runs_s) each.push_back(std::round(w * 1000) / 1000);
    j["runs_s"] = each;
    j["peak_shm"] = r.peak_shm;
    j["planned_shm"] = r.planned_shm;
    j["samples"] = r.samples;
    j["within_budget"] = r.within_budget();
    j["ok"] = r.ok() && r.within_budget();
    if (!r.problem.empty()) j["problem"] = r.problem;
    runs.push_back(j);
  }
  nlohmann::ordered_json doc;
  doc["runs"] = runs;
  doc["recommended_workers"] = best ? nlohmann::ordered_json(results[*best].workers) : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json close = nlohmann::ordered_json::array();
  for (std::size_t i : within_spread_of_fastest(results)) close.push_back(results[i].workers);
  doc["within_spread_of_fastest"] = close;
  return doc;
}

void run_tune(const TuneOptions& o) {
  WrapperOptions w = wrapper_options_for(o.run, "tune");
  if (w.sizing.workers)
    throw usage_error("--workers: tune chooses the worker count; give the counts to try with --counts");
  const Config config = load_ctl_config();
  const HostInfo host = probe_host();
  std::vector<std::uint64_t> counts;
  if (o.counts) {
    counts = parse_counts(*o.counts);
  } else {
    WrapperOptions probe = w;
    probe.sizing.workers = "0";
    counts = default_counts(prepare_run(probe, config, host).plan.cpus);
  }
  if (!has_workers_placeholder(w.command))
    std::cerr << "gpu-run-ctl tune: warning: no {workers} in the command: the workload must read the worker count "
                 "from GPU_RUN_WORKERS\n";
  if (o.repeats < 2 || o.repeats > 100)
    throw usage_error("--repeats " + std::to_string(o.repeats) +
                      ": expected 2..100 (tune needs the spread of at least two runs per count)");
  const TempDir logs("gpu-run-tune");  // the runs' output
  std::vector<TuneResult> results(counts.size());
  std::vector<std::optional<EngineInvocation>> invs(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    TuneResult& r = results[i];
    r.workers = counts[i];
    WrapperOptions wn = w;
    wn.sizing.workers = std::to_string(counts[i]);
    wn.command = substitute_workers(w.command, counts[i]);
    try {
      invs[i] = prepare_run(wn, config, host);
      r.planned_shm = invs[i]->applied_shm;
    } catch (const Error& e) {
      r.problem = e.what();
      std::cerr << "tune: workers " << counts[i] << ": not run: " << r.problem << "\n";
    }
  }
  // Round by round over the counts, so that a drift of the host (caches, a neighbour's load)
  // spreads over every count instead of favouring one.
  const std::size_t total = counts.size() * o.repeats;
  std::size_t step_no = 0;
  for (unsigned round = 1; round <= o.repeats; ++round) {
    for (std::size_t i = 0; i < counts.size(); ++i) {
      ++step_no;
      TuneResult& r = results[i];
      if (!invs[i] || (r.ran && r.exit_code != 0)) continue;  // not run, or failed: once is enough
      std::cerr << "tune: [" << step_no << "/" << total << "] workers " << counts[i] << ", run " << round << "/"
                << o.repeats << ", /dev/shm " << format_size(r.planned_shm) << " ... " << std::flush;
      MeasureOptions mo;
      mo.output = logs.path() / ("run-" + std::to_string(counts[i]) + "-" + std::to_string(round) + ".log");
      const MeasuredRun run = run_measured(invs[i]->argv, invs[i]->engine, mo);
      r.ran = true;
      r.exit_code = run.exit_code;
      r.add_run(run.wall_seconds);
      r.peak_shm = std::max(r.peak_shm, run.shm.peak);
      r.samples += run.shm.samples;
      if (!run.sample_error.empty())
        r.problem = run.sample_error;
      else if (run.exit_code != 0)
        r.problem = last_line(*mo.output);
      std::cerr << seconds_text(run.wall_seconds) << ", peak " << format_size(run.shm.peak) << ", exit "
                << run.exit_code << "\n";
      if (run.interrupted_by) throw Error("tune: interrupted", 0, 128 + run.interrupted_by);
    }
  }
  const std::optional<std::size_t> best = recommend(results);
  if (o.json)
    std::cout << tune_json(results, best).dump(2) << "\n";
  else
    std::cout << tune_table(results, best, utf8_locale()) << tune_recommendation(results, best) << "\n";
  std::cout.flush();
  if (within_spread_of_fastest(results).empty())
    throw Error("tune: no worker count ran to the end within its planned /dev/shm", 0, kExitFailure);
}

void add_tune_command(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Run a workload over DataLoader worker counts; recommend the fastest within the /dev/shm budget");
  cmd->footer(
      "Usage: gpu-run-ctl tune [OPTIONS] [--counts 0,1,2,4,8] -- [docker run options] IMAGE COMMAND...\n\n"
      "Each count N runs --repeats times (round by round over the counts) through gpu-run's logic with\n"
      "--workers N: /dev/shm planned for N, GPU_RUN_WORKERS=N in the container and every {workers} in\n"
      "COMMAND replaced by N. Measures wall time (the median of the runs, and their spread: the slowest\n"
      "minus the fastest) and peak /dev/shm (100 Hz); the budget of a run is its planned /dev/shm (bounded\n"
      "by --memory). The fastest count is recommended only when its median beats every other count's by\n"
      "more than the larger of the two spreads; else tune says the difference is noise (exit 0).\n"
      "The runs' output is kept out of the way; a failed run shows its last line. Adds --rm to the runs.");
  cmd->add_option("--counts", o->counts, "Worker counts to try (default 0,1,2,4,8, up to the CPUs)")
      ->type_name("N,N,...");
  cmd->add_option("--repeats", o->repeats, "Runs per count (at least 2: the spread needs two)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the results as JSON");
  add_run_options(*cmd, o->run, /*with_workers=*/false);
  cmd->callback([o] { run_tune(*o); });
}

}  // namespace gpurun
