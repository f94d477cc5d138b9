#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "decision/config.hpp"
#include "oci/container.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

namespace fs = std::filesystem;

// The host config a person's gpu-run-ctl uses: $GPU_RUN_CONFIG or /etc/gpu-run/config.json.
Config load_ctl_config();

// The running container `name` of `engine` (--engine, else the config's: docker or podman),
// inspected once. Throws Error (exit 2) for another engine, an unknown container, or one that
// is not running, saying `why_running` a running one is needed.
ContainerInfo inspect_running(const std::optional<std::string>& engine, const Config& config, const std::string& name,
                              const std::string& why_running);

// The profile search path of a person's command line: `dirs` first, then the search path of
// docs/ARCHITECTURE.md ("Profiles").
ProfileStore ctl_store(const std::vector<std::string>& dirs, const Config& config, const EnvLookup& env = process_env);

// An existing file's text, or nullopt when it does not exist. Throws Error naming the path.
std::optional<std::string> read_existing_file(const fs::path& path, const std::string& what);

// The outcome of merging gpu-run into a file `configure` edits.
struct FileEdit {
  std::string text;                // the whole resulting file
  bool changed = false;            // false: already configured, nothing to write
  bool first = true;               // the file had no gpu-run entry yet: its backup is taken now
  std::vector<std::string> notes;  // one line each, for the person running it
};

// `configure ... --dry-run`: `shown` (the file as it would be) on stdout; on stderr that `path`
// would become it ("the <format> above") or is already configured, nothing written, and the
// edit's notes. The one report of configure docker, podman and containerd.
void report_dry_run(const fs::path& path, const std::string& shown, const FileEdit& edit, const char* format);

// How `configure` replaces a file it edits: the old text (if any) goes to `backup`
// first, then the new text replaces `path` atomically, keeping the old file's mode and owner.
// Creates missing parent directories. Throws Error naming the path.
void replace_file(const fs::path& path, const std::string& text, const std::optional<std::string>& old_text,
                  const std::optional<fs::path>& backup);

// The backup `configure` keeps of a file as it was before gpu-run's entry: <path>.gpu-run.bak.
fs::path backup_path(const fs::path& path);

// replace_file with the backup `configure` makes when it adds gpu-run's entry to a file that
// existed (`old_text`) without one (`first`): backup_path(path), which `configure --undo`
// restores. A file that has the entry keeps the backup of the first time. Returns the backup's
// path, if one was written.
std::optional<fs::path> replace_file_with_backup(const fs::path& path, const std::string& text,
                                                 const std::optional<std::string>& old_text, bool first);

// The gpu-run binary `name` that `configure` registers: `given` (from `flag`), else the one
// next to gpu-run-ctl, else `fallback` when given. Absolute. Throws Error (exit 2) when it is
// not an executable file.
fs::path gpu_run_binary(const std::optional<std::string>& given, const std::string& name, const std::string& flag,
                        const std::optional<fs::path>& fallback = std::nullopt);

// Checks the gpu-run config that `configure` points the runtime or hook at: loads it when it
// exists (throwing its Error, naming the file and key, when malformed). Returns a note line
// when it does not exist yet, else "".
std::string check_gpu_run_config(const fs::path& path);

// How gpu-run-runtime, started by `daemon` (dockerd, containerd: neither can pass it an
// argument), finds `config_file`: the line to print, with a systemd drop-in for the
// service `unit` when the file is not the default one.
std::string runtime_config_note(const fs::path& config_file, const std::string& daemon, const std::string& unit);

}  // namespace gpurun
