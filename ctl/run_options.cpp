#include "ctl/run_options.hpp"

#include <CLI/CLI.hpp>

#include "base/error.hpp"

namespace gpurun {

SizingFlagOptions add_sizing_flags(CLI::App& cmd, SizingFlags& f, bool with_workers) {
  SizingFlagOptions o;
  o.profile =
      cmd.add_option("--profile", f.profile,
                     "Profile name or path to a .json file (default: the host's default_profile, else \"default\")")
          ->type_name("NAME");
  o.gpus =
      cmd.add_option("--gpus", f.gpus, "GPU ranks, Docker's syntax: N, all, device=0,1 (default: none, one loader)")
          ->type_name("N");
  if (with_workers)
    o.workers =
        cmd.add_option("--workers", f.workers, "DataLoader workers per GPU (default: the profile's, or from the CPUs)")
            ->type_name("N");
  o.batch_size =
      cmd.add_option("--batch-size", f.batch_size, "Batch size per GPU (default: the profile's)")->type_name("N");
  o.prefetch_factor =
      cmd.add_option("--prefetch-factor", f.prefetch_factor, "DataLoader prefetch_factor (default: the profile's)")
          ->type_name("N");
  o.gpu_request =
      cmd.add_option("--gpu-request", f.gpu_request,
                     "How --gpus reaches the engine: docker, cdi or none (default: the config's, else by engine)")
          ->type_name("MODE");
  o.profile_dir = cmd.add_option("--profile-dir", f.profile_dirs, "Look for profiles in DIR first (repeatable)")
                      ->type_name("DIR")
                      ->allow_extra_args(false);
  return o;
}

void add_run_options(CLI::App& cmd, RunOptions& o, bool with_workers) {
  add_sizing_flags(cmd, o.sizing, with_workers);
  cmd.add_option("--engine", o.engine, "docker or podman (default: the config's engine)")->type_name("ENGINE");
  cmd.add_option("ARGS", o.args, "After --: [docker run options] IMAGE COMMAND...")->type_name("");
}

WrapperOptions wrapper_options_for(const RunOptions& o, const std::string& command) {
  if (o.args.empty())
    throw usage_error(command + ": missing IMAGE: usage: gpu-run-ctl " + command +
                      " [options] -- [docker run options] IMAGE COMMAND...");
  WrapperOptions w = split_wrapper_args(o.args);
  if (w.dry_run || w.json || w.record || w.help || w.version || w.explain)
    throw usage_error(command +
                      ": gpu-run's --dry-run, --json, --record, --explain, --help and --version do not apply after --");
  auto merge = [](std::optional<std::string>& into, const std::optional<std::string>& flag, const char* name) {
    if (!flag) return;
    if (into) throw usage_error(std::string(name) + ": given both before and after --: give it once");
    into = flag;
  };
  merge(w.sizing.profile, o.sizing.profile, "--profile");
  merge(w.sizing.gpus, o.sizing.gpus, "--gpus");
  merge(w.sizing.workers, o.sizing.workers, "--workers");
  merge(w.sizing.batch_size, o.sizing.batch_size, "--batch-size");
  merge(w.sizing.prefetch_factor, o.sizing.prefetch_factor, "--prefetch-factor");
  merge(w.engine, o.engine, "--engine");
  merge(w.sizing.gpu_request, o.sizing.gpu_request, "--gpu-request");
  w.sizing.profile_dirs.insert(w.sizing.profile_dirs.begin(), o.sizing.profile_dirs.begin(),
                               o.sizing.profile_dirs.end());
  bool keep = false;
  for (const auto& a : w.engine_options)
    if (a == "--rm" || a.rfind("--rm=", 0) == 0) keep = true;
  if (!keep) w.engine_options.insert(w.engine_options.begin(), "--rm");
  return w;
}

fs::path user_profile_dir(const EnvLookup& env) {
  if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) return fs::path(*xdg) / "gpu-run" / "profiles";
  if (auto home = env("HOME"); home && !home->empty()) return fs::path(*home) / ".config" / "gpu-run" / "profiles";
  throw usage_error("--out-dir: neither XDG_CONFIG_HOME nor HOME is set: give --out-dir DIR");
}

}  // namespace gpurun
