#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiles/profile.hpp"
#include "shm/perf_log.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl profiles learn NAME`: NAME's calibration from the performance logs' lines of NAME.
struct ProfilesLearnOptions {
  std::string name;
  std::vector<std::string> profile_dirs;  // searched first; the first is where NAME is written
  std::vector<std::string> logs;          // empty: the user's log (perf_log_path) and kSystemPerfLog
  bool print = false;                     // show what would be written, write nothing
};

// One line of a performance log, and where it was read (FILE:LINE).
struct LoggedRun {
  PerfRecord record;
  std::string where;
};

// What learn made of one run of the profile.
struct LearnedRun {
  LoggedRun run;
  std::string skipped;            // why it taught nothing (empty: it was used)
  std::uint64_t need = 0;         // the margin over its peak: ceil(headroom x peak), what its shape's plan must reach
  std::uint64_t plan_before = 0;  // the plan of its shape with the profile as it is
  std::uint64_t plan_after = 0;   // with the learned calibration, under a guard
  std::uint64_t plan_unguarded = 0;  // with it where no guard runs (kUnguardedLearnedHeadroom)
};

struct Learned {
  std::optional<Calibration> calibration;  // none: no run to learn from
  std::vector<LearnedRun> runs;
};

// The calibration that plans every used run's shape at least its peak times the profile's
// headroom, as small as that allows: each run's peak scaled to the others' shapes the way a
// calibration is (per sample of the first loader: plan_shm), the least of those that covers
// every run, raised until it does. A run is used when it ran to its end (exit 0; the node guard's
// lines, whose exit is unknown, count), with workers, a batch size and a peak.
// Pure. Throws Error (exit 2) when the profile describes its first loader's samples itself
// (loaders[0].fields or sample_bytes), which a calibration does not change.
Learned learn_calibration(const Profile& profile, const std::vector<LoggedRun>& runs, const std::string& measured_at);

// The lines of `text` (a performance log named `source`) whose profile is `name`; blank lines
// skipped. Throws Error (exit 2) naming source:line for a line that is not a record.
std::vector<LoggedRun> runs_of_profile(const std::string& text, const std::string& source, const std::string& name);

// Reads the logs, learns, prints each run and the plans before and after, and writes NAME's
// calibration (its file in the first --profile-dir, else the user's directory; a new file
// holds every key of NAME as it loads now). Throws Error (exit 2) when no run can be learned from.
void run_profiles_learn(const ProfilesLearnOptions& options);

// Registers `learn` on the `profiles` command.
void add_profiles_learn_command(CLI::App& profiles);

}  // namespace gpurun
