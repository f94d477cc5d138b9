#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ctl/run_options.hpp"
#include "decision/sizing.hpp"
#include "oci/host.hpp"
#include "profiles/profile.hpp"

namespace CLI {
class App;
}

namespace gpurun {

// `gpu-run-ctl calibrate --out-profile NAME [gpu-run options] -- [docker run options] IMAGE CMD...`:
// runs the workload with generous /dev/shm, measures its peak and writes a profile that
// carries the measurement and the conditions it was taken under.
struct CalibrateOptions {
  RunOptions run;
  std::string out_profile;
  std::optional<std::string> out_dir;  // default: the user's profile directory
  bool force = false;                  // replace an existing profile file
};

// NCCL's segments seen in /dev/shm during a run with `ranks` ranks (core NcclShmSplit).
struct NcclMeasurement {
  std::uint64_t bytes = 0;
  std::uint64_t ranks = 0;
};

// The profile file to write (core's profile_file_document): extends the base (when `extends`
// is set; else every key of the base is inlined), with batch_size, workers_per_gpu and
// prefetch_factor as measured, the calibration block (the DataLoaders' peak), and with `nccl`
// the nccl section's measured and measured_ranks.
ProfileFile calibrated_profile_file(const std::string& name, const std::string& description, const Profile& base,
                                    const std::optional<std::string>& extends, const Calibration& calibration,
                                    const std::optional<NcclMeasurement>& nccl = std::nullopt);

// The base profile with the measurement applied: what loading the written file gives.
Profile calibrated_profile(const std::string& name, const Profile& base, const Calibration& calibration,
                           const std::optional<NcclMeasurement>& nccl = std::nullopt);

// The /dev/shm a calibration run gets: min(MemAvailable / 2, 16 GiB), at least the plan,
// at most the memory limit; whole MiB.
std::uint64_t generous_shm(const HostInfo& host, const ShmPlan& plan, std::optional<std::uint64_t> memory_limit);

// Runs the workload, prints the measured peak, the new plan for the same conditions and
// their ratio, and writes the profile atomically. Throws Error (exit 2) on bad input, exit 1
// when the workload fails or uses no /dev/shm.
void run_calibrate(const CalibrateOptions& options);

// Registers `calibrate` on `app`.
void add_calibrate_command(CLI::App& app);

}  // namespace gpurun
