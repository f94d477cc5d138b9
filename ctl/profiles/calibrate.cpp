#include "ctl/profiles/calibrate.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/program.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "decision/config.hpp"
#include "engine/invocation.hpp"
#include "engine/measured_run.hpp"
#include "shm/nccl_segments.hpp"

namespace gpurun {
namespace {

constexpr std::uint64_t kGenerousCap = 16 * kGiB;

bool names_a_profile(const std::string& s) {
  return is_valid_profile_name(s) && !(s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

std::string ratio_text(std::uint64_t a, std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", b ? static_cast<double>(a) / static_cast<double>(b) : 0.0);
  return buf;
}

}  // namespace

Profile calibrated_profile(const std::string& name, const Profile& base, const Calibration& c,
                           const std::optional<NcclMeasurement>& nccl) {
  Profile p = base;
  if (nccl) {
    if (!p.nccl) p.nccl = NcclSpec{};
    p.nccl->measured = nccl->bytes;
    p.nccl->measured_ranks = nccl->ranks;
  }
  p.name = name;
  p.batch_size = c.batch_size;
  p.workers_per_gpu = c.workers;
  p.prefetch_factor = c.prefetch_factor;
  p.calibration = c;
  return p;
}

ProfileFile calibrated_profile_file(const std::string& name, const std::string& description, const Profile& base,
                                    const std::optional<std::string>& extends, const Calibration& c,
                                    const std::optional<NcclMeasurement>& nccl) {
  ProfileFile file;
  file.profile = calibrated_profile(name, base, c, nccl);
  file.profile.description = description;
  file.extends = extends;
  if (extends) {
    file.keys = {"description", "batch_size", "workers_per_gpu", "prefetch_factor", "calibration"};
    // Key by key over the parent's section (a flat nccl_reserve gives way to it).
    if (nccl) file.keys.insert(file.keys.end(), {"nccl.measured", "nccl.measured_ranks"});
  } else {
    // No parent to name (the base came from a path, or is the file being replaced): inline it.
    file.keys = profile_document_keys();
  }
  return file;
}

std::uint64_t generous_shm(const HostInfo& host, const ShmPlan& plan, std::optional<std::uint64_t> memory_limit) {
  std::uint64_t size = host.mem_available ? std::min(host.mem_available / 2, kGenerousCap) : kGenerousCap;
  if (memory_limit) size = std::min(size, *memory_limit);
  size = std::max(size, plan.shm);
  return std::max<std::uint64_t>(size / kMiB * kMiB, kMiB);
}

void run_calibrate(const CalibrateOptions& o) {
  if (!is_valid_profile_name(o.out_profile))
    throw usage_error("--out-profile '" + o.out_profile.substr(0, 80) +
                      "': expected a profile name, [team/]name of a-z 0-9 . _ - (e.g. vision/resnet50)");
  WrapperOptions w = wrapper_options_for(o.run, "calibrate");
  const fs::path out_dir = o.out_dir ? fs::path(*o.out_dir) : user_profile_dir();
  if (out_dir.empty()) throw usage_error("--out-dir: empty path");
  const fs::path out_path = out_dir / (o.out_profile + ".json");
  std::error_code ec;
  if (fs::exists(out_path, ec) && !o.force)
    throw usage_error("--out-profile " + o.out_profile + ": " + out_path.string() +
                      " exists: pass --force to replace it");

  const Config config = load_ctl_config();
  const HostInfo host = probe_host();
  // Plan once as gpu-run would, to learn the conditions and the base profile.
  const EngineInvocation first = prepare_run(w, config, host);
  const ShmPlan& model = first.plan;
  if (model.workers == 0)
    throw usage_error(
        "--workers 0: with no workers batches never go through /dev/shm, so there is nothing to "
        "calibrate; give --workers 1 or more");
  const EngineOptionFacts facts = scan_engine_options(w.engine_options);
  std::optional<std::uint64_t> memory_limit;
  if (facts.memory) memory_limit = parse_size(*facts.memory, "--memory");
  if (memory_limit && *memory_limit == 0) memory_limit.reset();
  std::uint64_t shm = 0;
  if (!facts.shm_size) {
    shm = generous_shm(host, model, memory_limit);
    w.engine_options.insert(w.engine_options.begin(), {"--shm-size", engine_size(shm)});
  }
  const EngineInvocation inv = prepare_run(w, config, host);
  for (const auto& line : inv.warnings) print_warning("gpu-run-ctl", line);

  const std::string base_arg = profile_argument(w.sizing, config);
  const Profile base = load_sizing_profile(w.sizing, config);

  fs::create_directories(out_path.parent_path(), ec);
  if (ec) throw Error("--out-dir: create " + out_path.parent_path().string() + ": " + ec.message(), ec.value());

  std::cerr << "calibrate: running " << w.image << " with /dev/shm of " << format_size(inv.applied_shm)
            << (facts.shm_size ? " (your --shm-size)" : " (generous)") << ", workers " << model.workers
            << ", batch_size " << model.batch_size << ", prefetch_factor " << model.prefetch_factor << ", gpus "
            << model.gpus << "\n";
  std::cout.flush();
  // NCCL's segments are not the DataLoaders': they are told apart sample by sample.
  NcclShmSplit split;
  MeasureOptions measure;
  measure.on_sample = [&split](int pid, const std::string&, const ShmUsage& u, const ShmSampleStats&) {
    split.sample(pid, u.used, std::chrono::steady_clock::now().time_since_epoch());
  };
  const MeasuredRun run = run_measured(inv.argv, inv.engine, measure);
  if (!run.sample_error.empty()) throw Error("calibrate: " + run.sample_error, 0, kExitFailure);
  if (run.exit_code != 0)
    throw Error("calibrate: the workload exited with status " + std::to_string(run.exit_code) +
                    ": no profile written (it must run to the end to be measured)",
                0, kExitFailure);
  if (!run.container_seen || run.shm.samples == 0)
    throw Error("calibrate: the container ended before it could be sampled: nothing measured, no profile written", 0,
                kExitFailure);
  if (run.shm.peak == 0)
    throw Error(
        "calibrate: the workload used no /dev/shm (does it read GPU_RUN_WORKERS or take --workers?): "
        "no profile written",
        0, kExitFailure);

  if (!split.unread().empty())
    print_warning("gpu-run-ctl", "calibrate: NCCL's segments of " + std::to_string(split.unread().size()) +
                                     " process(es) not told apart, so the DataLoaders' peak may be too large: " +
                                     split.unread().front());
  const std::uint64_t loader_peak = split.nccl_peak() ? split.rest_peak() : run.shm.peak;
  if (loader_peak == 0)
    throw Error("calibrate: the workload used no /dev/shm besides NCCL's segments (" + format_size(split.nccl_peak()) +
                    "): no DataLoader to measure, no profile written",
                0, kExitFailure);
  std::optional<NcclMeasurement> nccl;
  if (split.nccl_peak() && model.ranks >= 2) nccl = NcclMeasurement{split.nccl_peak(), model.ranks};

  Calibration c;
  c.peak_shm = loader_peak;
  c.workers = model.workers;
  c.batch_size = model.batch_size;
  c.gpus = model.gpus;
  c.prefetch_factor = model.prefetch_factor;
  c.pin_memory = base.pin_memory;
  c.measured_at = utc_timestamp(std::time(nullptr));

  // Extend the base by name, unless it came from a path or is the very file being replaced.
  std::optional<std::string> extends;
  std::error_code eq_ec;
  const bool replaces_base = !base.chain.empty() && fs::equivalent(base.chain.front(), out_path, eq_ec);
  if (names_a_profile(base_arg) && !replaces_base) extends = base_arg;
  const std::string description =
      "Calibrated by gpu-run-ctl calibrate on " + c.measured_at + ": peak /dev/shm " + format_size(c.peak_shm) +
      (nccl ? " besides NCCL's " + format_size(nccl->bytes) : std::string()) + " for image " + w.image + " with " +
      std::to_string(c.workers) + " workers, batch " + std::to_string(c.batch_size) + ", prefetch " +
      std::to_string(c.prefetch_factor) + ", " + std::to_string(c.gpus) + " GPU(s); based on " + base_arg;
  const std::string text =
      profile_text(profile_file_document(calibrated_profile_file(o.out_profile, description, base, extends, c, nccl)));
  // Validate before anything is replaced.
  parse_profile_document(text, out_path.string());
  write_file_atomic(out_path.string(), text, 0644);

  // Load what was written, as gpu-run will, and plan the same job with it.
  std::vector<std::string> dirs = {out_dir.string()};
  dirs.insert(dirs.end(), w.sizing.profile_dirs.begin(), w.sizing.profile_dirs.end());
  const Profile written = ctl_store(dirs, config).load_file(out_path);
  const EngineOptionFacts plain_facts = scan_engine_options({});
  const ShmPlan plan = plan_shm(
      written, sizing_request(flags_request(w.sizing), engine_option_spec(plain_facts), node_host_facts(host), config));

  std::cout << "measured peak /dev/shm: " << format_size(run.shm.peak) << " (" << run.shm.peak << " bytes; "
            << run.shm.samples << " samples over " << static_cast<int>(run.shm.seconds * 10 + 0.5) / 10.0
            << "s) with workers " << c.workers << ", batch_size " << c.batch_size << ", prefetch_factor "
            << c.prefetch_factor << ", gpus " << c.gpus << "\n";
  if (split.nccl_peak()) {
    std::cout << "  NCCL's segments (/dev/shm/nccl-*): " << format_size(split.nccl_peak()) << " in "
              << split.nccl_segments() << ", the DataLoaders' peak besides them: " << format_size(loader_peak)
              << (nccl ? "; nccl.measured for " + std::to_string(nccl->ranks) + " ranks"
                       : "; one rank: not written to the nccl section")
              << "\n";
  }
  std::cout << "model plan (" << base.name << "):      " << format_size(model.shm) << " = "
            << ratio_text(model.shm, run.shm.peak) << " the peak\n";
  std::cout << "calibrated plan (" << o.out_profile << "): " << format_size(plan.shm) << " = "
            << ratio_text(plan.shm, run.shm.peak) << " the peak"
            << (plan.shm == plan.min_shm && plan.shm > plan.need
                    ? " (raised to min_shm " + format_size(plan.min_shm) + ")"
                    : "")
            << "\n";
  std::cout << "wrote " << out_path.string() << "\n";
  std::cout << "use it: gpu-run" << (o.out_dir ? " --profile-dir " + out_dir.string() : "") << " --profile "
            << o.out_profile << " ...\n";
}

// How calibrate runs the workload and what the profile it writes holds.
constexpr const char* kCalibrateFooter =
    "Usage: gpu-run-ctl calibrate --out-profile NAME [OPTIONS] -- [docker run options] IMAGE COMMAND...\n\n"
    "The workload runs once through gpu-run's logic with --shm-size min(MemAvailable/2, 16g) (or yours),\n"
    "sampled at 100 Hz. The profile written extends --profile with batch_size, workers_per_gpu and\n"
    "prefetch_factor as run and a `calibration` block (peak and conditions); the model then scales\n"
    "the measured bytes per batch to other batch sizes, workers and GPUs. NCCL's segments (the\n"
    "/dev/shm/nccl-* its processes map) are measured apart; with --gpus 2 or more they become the\n"
    "profile's nccl.measured and nccl.measured_ranks. Adds --rm to the run.";

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Run a workload with generous /dev/shm, measure its peak and write a profile that carries it");
  cmd->footer(kCalibrateFooter);
  cmd->add_option("--out-profile", o->out_profile, "Name of the profile to write, [team/]name")
      ->type_name("NAME")
      ->required();
  cmd->add_option("--out-dir", o->out_dir, "Directory to write it in (default: $XDG_CONFIG_HOME/gpu-run/profiles)")
      ->type_name("DIR");
  cmd->add_flag("--force", o->force, "Replace an existing profile file");
  add_run_options(*cmd, o->run);
  cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace gpurun
