#include "ctl/ctl_common.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "base/program_path.hpp"

namespace gpurun {

namespace {
constexpr std::size_t kMaxEditedFile = 4 << 20;
}  // namespace

Config load_ctl_config() { return load_config(config_path(std::nullopt)); }

ContainerInfo inspect_running(const std::optional<std::string>& engine_option, const Config& config,
                              const std::string& name, const std::string& why_running) {
  const std::string engine = engine_option.value_or(config.engine);
  if (engine != "docker" && engine != "podman")
    throw usage_error("--engine '" + engine.substr(0, 40) + "': expected docker or podman");
  ContainerInfo info = inspect_container(engine, name);
  if (!info.running || info.pid <= 0) throw usage_error("container '" + name + "' is not running: " + why_running);
  return info;
}

ProfileStore ctl_store(const std::vector<std::string>& dirs, const Config& config, const EnvLookup& env) {
  std::vector<fs::path> cli_dirs(dirs.begin(), dirs.end());
  return ProfileStore(profile_search_path(cli_dirs, config.profile_dirs, /*include_user=*/true, env));
}

std::optional<std::string> read_existing_file(const fs::path& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    int err = errno;
    throw Error(what + " " + path.string() + ": " + std::strerror(err), err);
  }
  return read_small_file(path, kMaxEditedFile, what);
}

void replace_file(const fs::path& link, const std::string& text, const std::optional<std::string>& old_text,
                  const std::optional<fs::path>& backup) {
  // A symlinked file (daemon.json kept in a config repository) is edited where it lives.
  std::error_code status_ec, link_ec;
  const bool is_link = fs::is_symlink(fs::symlink_status(link, status_ec));
  const fs::path path = is_link ? fs::canonical(link, link_ec) : link;
  if (link_ec) throw Error(link.string() + ": cannot resolve the symlink: " + link_ec.message(), link_ec.value());
  unsigned mode = 0644;
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed) mode = st.st_mode & 07777;
  // The new file goes to the old one's owner (a config kept by another user).
  std::optional<FileOwner> owner;
  if (existed && (st.st_uid != ::geteuid() || st.st_gid != ::getegid())) owner = FileOwner{st.st_uid, st.st_gid};
  std::error_code ec;
  if (path.has_parent_path() && !fs::is_directory(path.parent_path(), ec)) {
    fs::create_directories(path.parent_path(), ec);
    if (ec)
      throw Error("create directory " + path.parent_path().string() + ": " + ec.message() +
                      (ec.value() == EACCES ? " (run as root, or pick another path)" : ""),
                  ec.value(), kExitFailure);
  }
  try {
    if (old_text && backup) write_file_atomic(backup->string(), *old_text, mode, Durability::kDurable, owner);
    write_file_atomic(path.string(), text, mode, Durability::kDurable, owner);
  } catch (const Error& e) {
    throw e.with_hint(e.errno_value() == EACCES ? " (run as root, or pick another path)" : "");
  }
}

fs::path backup_path(const fs::path& path) { return path.string() + ".gpu-run.bak"; }

std::optional<fs::path> replace_file_with_backup(const fs::path& path, const std::string& text,
                                                 const std::optional<std::string>& old_text, bool first) {
  std::optional<fs::path> backup;
  if (old_text && first) backup = backup_path(path);
  replace_file(path, text, old_text, backup);
  return backup;
}

fs::path gpu_run_binary(const std::optional<std::string>& given, const std::string& name, const std::string& flag,
                        const std::optional<fs::path>& fallback) {
  if (given) {
    const fs::path path = fs::absolute(*given);
    if (::access(path.c_str(), X_OK) != 0)
      throw usage_error(flag + " " + path.string() + ": not an executable file; give " + name + "'s path");
    return path;
  }
  const fs::path beside = program_dir() / name;
  if (::access(beside.c_str(), X_OK) == 0) return beside;
  if (fallback && ::access(fallback->c_str(), X_OK) == 0) return *fallback;
  throw usage_error(beside.string() + ": no executable " + name + " next to gpu-run-ctl" +
                    (fallback ? " (nor " + fallback->string() + ")" : "") + "; install it there or pass " + flag +
                    " PATH");
}

std::string check_gpu_run_config(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT)
    return "note: " + path.string() + " does not exist yet: gpu-run uses its built-in defaults until it does\n";
  load_config(path);
  return "";
}

std::string runtime_config_note(const fs::path& config_file, const std::string& daemon, const std::string& unit) {
  if (config_file == kDefaultConfigPath)
    return "gpu-run-runtime reads " + config_file.string() + " (unless " + daemon +
           "'s environment sets GPU_RUN_CONFIG)\n";
  return "gpu-run-runtime reads $GPU_RUN_CONFIG from " + daemon + "'s environment, else " +
         std::string(kDefaultConfigPath) + "; to make it read " + config_file.string() + ", give " + daemon +
         " the variable with a systemd drop-in, /etc/systemd/system/" + unit +
         ".service.d/gpu-run.conf:\n"
         "  [Service]\n"
         "  Environment=\"GPU_RUN_CONFIG=" +
         config_file.string() + "\"\nthen `systemctl daemon-reload && systemctl restart " + unit +
         "` (an environment change needs a restart)\n";
}

void report_dry_run(const fs::path& path, const std::string& shown, const FileEdit& edit, const char* format) {
  std::cout << shown;
  std::cout.flush();
  std::cerr << "gpu-run-ctl: --dry-run: " << path.string()
            << (edit.changed ? std::string(" would become the ") + format + " above"
                             : std::string(" is already configured"))
            << " (nothing written)\n";
  for (const auto& n : edit.notes) std::cerr << "gpu-run-ctl: " << n << "\n";
}

}  // namespace gpurun
