#include "ctl/profiles/learn.hpp"

#include <CLI/CLI.hpp>
#include <cmath>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/profiles/calibrate.hpp"
#include "ctl/run_options.hpp"
#include "decision/sizing.hpp"

namespace gpurun {
namespace {

constexpr int kMaxRaises = 64;
constexpr std::size_t kMaxLogBytes = 64 << 20;
constexpr std::uint64_t kPage = 4096;

// The request a run was planned with, as a profile's plan sees it: no memory limit; its GPUs
// reaching it unless its first loader, pinned, had no pin thread (--gpu-request none); under a
// guard (the calibration learned is the tight one; plan_unguarded shows the other).
SizingRequest request_of(const PerfRecord& r, const Profile& p) {
  SizingRequest q;
  q.guarded = true;
  q.gpus = r.gpus;
  q.workers = r.workers;
  q.batch_size = r.batch_size;
  if (r.prefetch_factor) q.prefetch_factor = r.prefetch_factor;
  if (r.gpus > 0 && p.pin_memory && r.pin_thread && !*r.pin_thread) {
    q.gpu_reach = GpuReach::none;
    q.gpu_reach_why = "the run's GPUs did not reach it";
  }
  return q;
}

std::string skip_reason(const PerfRecord& r) {
  if (r.exit_status && *r.exit_status != 0)
    return "exit " + std::to_string(*r.exit_status) + ": it did not run to its end, so its peak may fall short";
  if (r.peak_shm == 0) return "no peak seen (the container was never sampled running)";
  if (r.workers == 0)
    return "workers 0: a plan of that shape puts nothing in /dev/shm, whatever it learns (its peak came from other "
           "loaders: describe them in the profile's loaders)";
  if (r.batch_size == 0) return "no batch size recorded";
  return "";
}

Calibration calibration_of(const PerfRecord& r, const Profile& p, const std::string& measured_at) {
  Calibration c;
  c.peak_shm = r.peak_shm;
  if (r.burst_shm) c.burst_shm = r.burst_shm;
  c.workers = r.workers;
  c.batch_size = r.batch_size;
  c.gpus = r.gpus;
  c.prefetch_factor = r.prefetch_factor ? r.prefetch_factor : p.prefetch_factor;
  // A calibration's pin_memory says whether a pin thread ran (calibrate's: the profile's, with a GPU).
  c.pin_memory = r.pin_thread.value_or(p.pin_memory);
  c.measured_at = measured_at;
  return c;
}

// The least peak_shm from `start` whose profile plans every used run at least its target; the
// plans it gives in `needs`.
Calibration cover_every_run(const Profile& profile, Calibration c, const std::vector<LearnedRun>& runs,
                            std::vector<std::uint64_t>& needs) {
  for (int i = 0; i < kMaxRaises; ++i) {
    const Profile p = calibrated_profile(profile.name, profile, c);
    long double worst = 1;
    needs.assign(runs.size(), 0);
    for (std::size_t j = 0; j < runs.size(); ++j) {
      if (!runs[j].skipped.empty()) continue;
      const ShmPlan plan = plan_shm(p, request_of(runs[j].run.record, profile));
      if (plan.loaders.empty() || !plan.loaders.front().calibrated)
        throw usage_error("profile " + profile.name +
                          " describes its first loader's samples itself (loaders[0].fields or sample_bytes), which "
                          "a calibration does not change: learn a profile whose first loader takes the top-level "
                          "fields, or describe the samples as measured");
      needs[j] = plan.need;
      if (plan.need < runs[j].need)
        worst = std::max(worst, static_cast<long double>(runs[j].need) / std::max<std::uint64_t>(plan.need, 1));
    }
    if (worst <= 1) return c;
    // The plan is not all calibrated bytes (NCCL, engines, the other loaders): raise by the
    // shortfall and look again; each pass moves at least a page.
    c.peak_shm =
        std::max<std::uint64_t>(static_cast<std::uint64_t>(std::ceil(c.peak_shm * worst)), sat_add(c.peak_shm, kPage));
  }
  throw Error("profile " + profile.name + ": no calibration plans every run above its peak (after " +
                  std::to_string(kMaxRaises) + " raises)",
              0, kExitFailure);
}

}  // namespace

std::vector<LoggedRun> runs_of_profile(const std::string& text, const std::string& source, const std::string& name) {
  std::vector<LoggedRun> out;
  std::istringstream in(text);
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(n);
    PerfRecord r = parse_perf_record(line, where);
    if (r.profile == name) out.push_back({std::move(r), where});
  }
  return out;
}

Learned learn_calibration(const Profile& profile, const std::vector<LoggedRun>& logged,
                          const std::string& measured_at) {
  Learned out;
  Profile unlearned = profile;
  for (const LoggedRun& run : logged) {
    LearnedRun l;
    l.run = run;
    l.skipped = skip_reason(run.record);
    if (l.skipped.empty()) {
      l.need = static_cast<std::uint64_t>(std::ceil(static_cast<long double>(run.record.peak_shm) * profile.headroom));
      l.plan_before = plan_shm(unlearned, request_of(run.record, profile)).shm;
    }
    out.runs.push_back(std::move(l));
  }
  std::optional<Calibration> best;
  std::vector<std::uint64_t> best_needs;
  std::uint64_t best_sum = 0;
  for (const LearnedRun& l : out.runs) {
    if (!l.skipped.empty()) continue;
    std::vector<std::uint64_t> needs;
    const Calibration c = cover_every_run(profile, calibration_of(l.run.record, profile, measured_at), out.runs, needs);
    std::uint64_t sum = 0;
    for (std::uint64_t n : needs) sum = sat_add(sum, n);
    if (!best || sum < best_sum) {
      best = c;
      best_sum = sum;
      best_needs = needs;
    }
  }
  if (!best) return out;
  out.calibration = best;
  const Profile learned = calibrated_profile(profile.name, profile, *best);
  for (LearnedRun& l : out.runs)
    if (l.skipped.empty()) {
      SizingRequest q = request_of(l.run.record, profile);
      l.plan_after = plan_shm(learned, q).shm;
      q.guarded = false;
      l.plan_unguarded = plan_shm(learned, q).shm;
    }
  return out;
}

namespace {

std::string shape_text(const PerfRecord& r) {
  return "gpus " + std::to_string(r.gpus) + ", workers " + std::to_string(r.workers) + ", batch " +
         std::to_string(r.batch_size) + (r.prefetch_factor ? ", prefetch " + std::to_string(r.prefetch_factor) : "");
}

// The logs learn reads when none is named: the user's and the node guard's, those that exist.
std::vector<fs::path> default_logs(const Config& config) {
  std::vector<fs::path> logs;
  try {
    logs.push_back(perf_log_path(config));
  } catch (const Error&) {
    // No HOME nor XDG_STATE_HOME (a service): the system log alone.
  }
  logs.emplace_back(kSystemPerfLog);
  return logs;
}

// NAME's file in `dir` with the calibration set: the file's own keys kept when it is there,
// else every key of the profile as it loads now (no parent: "extends": null).
std::string learned_text(const fs::path& path, const Profile& profile, const Calibration& c, std::size_t runs) {
  const Profile learned = calibrated_profile(profile.name, profile, c);
  const nlohmann::ordered_json calibration = profile_to_json(learned)["calibration"];
  if (const std::optional<std::string> existing = read_existing_file(path, "profile")) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(*existing, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) throw usage_error(path.string() + ": not a JSON object: fix it, then learn again");
    doc["calibration"] = calibration;
    return profile_text(doc);
  }
  ProfileFile file;
  file.profile = learned;
  file.profile.description = profile.description + " Calibration learned by gpu-run-ctl profiles learn from " +
                             std::to_string(runs) + (runs == 1 ? " run." : " runs.");
  file.keys = profile_document_keys();
  file.standalone = true;
  return profile_text(profile_file_document(file));
}

}  // namespace

void run_profiles_learn(const ProfilesLearnOptions& o) {
  if (!is_valid_profile_name(o.name))
    throw usage_error("profiles learn '" + o.name.substr(0, 80) +
                      "': expected a profile name, [team/]name of a-z 0-9 . _ - (e.g. vision/resnet50)");
  const Config config = load_ctl_config();
  const Profile profile = ctl_store(o.profile_dirs, config).load(o.name, /*allow_path=*/false);

  std::vector<fs::path> logs(o.logs.begin(), o.logs.end());
  const bool named = !logs.empty();
  if (!named) logs = default_logs(config);
  std::vector<LoggedRun> runs;
  std::string read;
  for (const fs::path& log : logs) {
    std::optional<std::string> text = read_existing_file(log, "performance log");
    if (!text) {
      if (named) throw usage_error("--log " + log.string() + ": no such file");
      continue;
    }
    if (text->size() > kMaxLogBytes)
      throw usage_error(log.string() + ": over " + format_size(kMaxLogBytes) + ": move its old lines aside");
    std::vector<LoggedRun> of = runs_of_profile(*text, log.string(), o.name);
    read += (read.empty() ? "" : ", ") + log.string() + " (" + std::to_string(of.size()) + ")";
    runs.insert(runs.end(), std::make_move_iterator(of.begin()), std::make_move_iterator(of.end()));
  }
  const Learned learned = learn_calibration(profile, runs, utc_timestamp(std::time(nullptr)));
  std::cout << "runs of " << o.name << " in " << (read.empty() ? "no log (none exists yet)" : read) << ":\n";
  std::size_t used = 0;
  for (const LearnedRun& l : learned.runs) {
    const PerfRecord& r = l.run.record;
    std::cout << "  " << l.run.where << ": " << shape_text(r) << ": peak " << format_size(r.peak_shm);
    if (!l.skipped.empty()) {
      std::cout << ": not used (" << l.skipped << ")\n";
      continue;
    }
    ++used;
    std::cout << " (" << (r.exit_status ? "exit " + std::to_string(*r.exit_status) : std::string("exit unknown"))
              << "): plan " << format_size(l.plan_before) << " -> " << format_size(l.plan_after)
              << (l.plan_unguarded != l.plan_after ? " (" + format_size(l.plan_unguarded) + " where no guard runs)"
                                                   : "")
              << "\n";
  }
  if (!learned.calibration)
    throw usage_error("profiles learn " + o.name +
                      ": no run to learn from (a run of the profile that ran to its end under gpu-run --record, "
                      "--guard or the node guard writes one)");
  const Calibration& c = *learned.calibration;
  std::cout << "calibration: peak " << format_size(c.peak_shm) << " at gpus " << c.gpus << ", workers " << c.workers
            << ", batch " << c.batch_size << ", prefetch " << c.prefetch_factor
            << (c.burst_shm ? ", burst " + format_size(*c.burst_shm) : std::string(", no burst recorded"))
            << ", headroom " << calibrated_headroom(c) << " (from " << used << (used == 1 ? " run" : " runs")
            << "; every one planned at "
            << "least its peak x " << profile.headroom << ")\n";
  // bench/GUARD-FUZZ.md: one job's peak moved by up to 1.54x between runs, so a plan learned from one
  // run is below some later run's peak for a few jobs in a hundred; the guard grows those.
  if (used == 1)
    std::cout << "note: learned from 1 run, and a job's peak can move between runs: doors plan it tight where a\n"
                 "  guard grows /dev/shm (gpu-run --guard, or the node guard gpu-run-ctl configure starts), with\n"
                 "  the wider headroom elsewhere; each guarded run adds a line, and learning again covers every peak\n";

  const fs::path dir = o.profile_dirs.empty() ? user_profile_dir() : fs::path(o.profile_dirs.front());
  const fs::path path = dir / (o.name + ".json");
  const std::string text = learned_text(path, profile, c, used);
  parse_profile_document(text, path.string());  // validated before anything is replaced
  if (o.print) {
    std::cout << "--print: would write " << path.string() << ":\n" << text;
    return;
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("create " + path.parent_path().string() + ": " + ec.message(), ec.value());
  write_file_atomic(path.string(), text, 0644);
  std::cout << "wrote " << path.string() << "\n";
}

void add_profiles_learn_command(CLI::App& profiles) {
  auto o = std::make_shared<ProfilesLearnOptions>();
  CLI::App* cmd = profiles.add_subcommand(
      "learn", "Write a profile's calibration from the peaks its runs reached (gpu-run --record, --guard, node guard)");
  cmd->add_option("NAME", o->name, "Profile name, [team/]name")->required();
  cmd->add_option("--profile-dir", o->profile_dirs, "Look for profiles in DIR first, and write there (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false);
  cmd->add_option("--log", o->logs,
                  "Read this performance log (repeatable; default: the user's and /var/lib/gpu-run/perf.jsonl)")
      ->type_name("FILE")
      ->allow_extra_args(false);
  cmd->add_flag("--print", o->print, "Show the runs, the plans and the file it would write; write nothing");
  cmd->footer(
      "Reads the lines of NAME in the performance logs (gpu-run --record and --guard append to the user's,\n"
      "the node guard to /var/lib/gpu-run/perf.jsonl) and writes NAME's calibration block: the plan of every\n"
      "run's shape (GPUs, workers, batch size, prefetch factor) is then at least its peak times the\n"
      "profile's headroom, and other shapes are scaled from it as calibrate's measurement is. Runs that did\n"
      "not end with exit 0 are not used (the node guard's lines have no exit: they are). It writes NAME's\n"
      "file in the first --profile-dir (else the user's directory), keeping the file's other keys, or a new\n"
      "file with every key of NAME as it loads now.");
  cmd->callback([o] { run_profiles_learn(*o); });
}

}  // namespace gpurun
