#include "ctl/node/node_install.hpp"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "base/k8s_quantity.hpp"
#include "base/program_path.hpp"
#include "ctl/configure/chain.hpp"
#include "ctl/configure/configure_containerd.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/node/host_root.hpp"
#include "decision/contract.hpp"

namespace gpurun {
namespace {

using nlohmann::ordered_json;

constexpr std::size_t kMaxProgramBytes = 256u << 20;
constexpr std::size_t kMaxConfigBytes = 16u << 20;
constexpr int kRecordVersion = 1;

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr) != 1)
    throw Error("SHA-256: OpenSSL's EVP_Digest failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

// The SHA-256 of the regular file at `path`; nullopt when there is none; "not a regular file"
// for anything else there.
std::optional<std::string> file_sha256(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw system_error("stat " + path.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) return std::string("not a regular file");
  return sha256_hex(read_small_file(path, kMaxProgramBytes, "installed file"));
}

// Every regular file below `dir` (containerd's config directory) and its checksum: what
// configure containerd changed there, drop-ins included.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec))
      files[it->path().string()] = sha256_hex(read_small_file(it->path(), kMaxConfigBytes, "containerd config"));
  }
  if (ec) throw system_error("list " + dir.string(), ec.value());
  return files;
}

void check_host_path(const std::string& path, const std::string& flag) {
  const bool ok = path.size() > 1 && path[0] == '/' && (path + "/").find("/../") == std::string::npos;
  if (!ok) throw usage_error(flag + " '" + path + "': expected an absolute path as the host names it");
}

fs::path checked_host_root(const std::string& root) {
  if (root.empty()) throw usage_error("--host-root: give the directory the host's / is mounted at (e.g. /host)");
  std::error_code ec;
  const fs::path absolute = fs::absolute(root, ec);
  if (ec || !fs::is_directory(absolute, ec))
    throw usage_error("--host-root '" + root + "': not a directory; mount the host's / there (hostPath /)");
  return absolute;
}

// Makes the directory `host_dir` under `root` and its missing parents, recording the ones made.
void make_dirs(const fs::path& root, const fs::path& host_dir, NodeInstallRecord& record) {
  fs::path path = "/";
  for (const auto& part : host_dir.relative_path()) {
    path /= part;
    const fs::path real = under_root(root, path);
    std::error_code ec;
    if (fs::is_directory(real, ec)) continue;
    if (::mkdir(real.c_str(), 0755) != 0 && errno != EEXIST) throw system_error("mkdir " + real.string(), errno);
    if (std::find(record.directories.begin(), record.directories.end(), path.string()) == record.directories.end())
      record.directories.push_back(path.string());
  }
}

const InstalledFile* recorded(const NodeInstallRecord& record, const std::string& path) {
  for (const InstalledFile& f : record.files)
    if (f.path == path) return &f;
  return nullptr;
}

void save_record(const fs::path& root, NodeInstallRecord& record) {
  make_dirs(root, fs::path(kNodeInstallRecord).parent_path(), record);
  write_file_atomic(under_root(root, kNodeInstallRecord).string(), to_json(record).dump(2) + "\n", 0644);
}

std::optional<NodeInstallRecord> load_record(const fs::path& root) {
  const fs::path path = under_root(root, kNodeInstallRecord);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  return parse_node_install_record(read_small_file(path, kMaxConfigBytes, "node install record"), path.string());
}

// A file to put on the host: where, what, its mode.
struct PlannedFile {
  std::string path;  // as the host names it
  std::string text;
  unsigned mode;
};

std::vector<PlannedFile> plan_files(const fs::path& source_dir) {
  std::vector<PlannedFile> files;
  for (const char* name : kNodePrograms) {
    const fs::path from = source_dir / name;
    if (::access(from.c_str(), X_OK) != 0)
      throw usage_error(from.string() + ": no executable " + name +
                        " next to gpu-run-ctl; the installer's image holds all four programs");
    files.push_back({std::string(kNodePrefix) + "/bin/" + name, read_small_file(from, kMaxProgramBytes, name), 0755});
  }
  // The built-in profiles, where the programs look for them (<bin>/../share/gpu-run/profiles).
  const fs::path profiles = source_dir.parent_path() / "share" / "gpu-run" / "profiles";
  std::error_code ec;
  std::vector<fs::path> found;
  for (auto it = fs::recursive_directory_iterator(profiles, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == ".json") found.push_back(it->path());
  if (ec || found.empty())
    throw usage_error(profiles.string() + ": no built-in profiles next to gpu-run-ctl's directory");
  std::sort(found.begin(), found.end());
  for (const fs::path& p : found)
    files.push_back({std::string(kNodePrefix) + "/share/gpu-run/profiles/" + fs::relative(p, profiles).string(),
                     read_small_file(p, kMaxConfigBytes, "profile"), 0644});
  return files;
}

void remove_installed(const fs::path& real) {
  if (::unlink(real.c_str()) != 0 && errno != ENOENT) throw system_error("remove " + real.string(), errno);
}

// Removes the directories the installer made, deepest first, when they are empty.
void remove_dirs(const fs::path& root, std::vector<std::string> dirs) {
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& d : dirs) {
    const fs::path real = under_root(root, d);
    if (::rmdir(real.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
      throw system_error("remove " + real.string(), errno);
  }
}

void restart_and_wait(const fs::path& root, const std::optional<std::string>& command, const std::string& socket,
                      unsigned timeout) {
  std::cout << "restarting containerd" << (command ? " (" + *command + ")" : " (systemctl on the host)") << "\n";
  restart_containerd(command);
  wait_for_cri(under_root(root, socket), std::chrono::seconds(timeout));
  std::cout << "containerd's CRI answers on " << socket << "\n";
}

}  // namespace

ordered_json to_json(const NodeInstallRecord& r) {
  ordered_json files = ordered_json::array();
  for (const InstalledFile& f : r.files) files.push_back({{"path", f.path}, {"sha256", f.sha256}});
  return {{"record_version", kRecordVersion},
          {"written_by", "gpu-run-ctl node install"},
          {"gpu_run_version", r.version},
          {"containerd",
           {{"config", r.containerd_config}, {"handler", r.handler}, {"configured", r.containerd_configured}}},
          {"files", files},
          {"directories", r.directories}};
}

NodeInstallRecord parse_node_install_record(const std::string& text, const std::string& source) {
  const std::string hint = ": remove what it lists by hand, then the file";
  try {
    const ordered_json j = ordered_json::parse(text);
    if (j.at("record_version").get<int>() != kRecordVersion)
      throw usage_error(source + ": record_version " + j.at("record_version").dump() +
                        " is not one this gpu-run-ctl reads" + hint);
    NodeInstallRecord r;
    r.version = j.at("gpu_run_version").get<std::string>();
    r.containerd_config = j.at("containerd").at("config").get<std::string>();
    r.handler = j.at("containerd").at("handler").get<std::string>();
    r.containerd_configured = j.at("containerd").at("configured").get<bool>();
    for (const auto& f : j.at("files"))
      r.files.push_back({f.at("path").get<std::string>(), f.at("sha256").get<std::string>()});
    for (const auto& d : j.at("directories")) r.directories.push_back(d.get<std::string>());
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw usage_error(source + ": not a node install record: " + e.what() + hint);
  }
}

std::string node_feature_file_text(const std::string& handler) {
  return "# gpu-run-ctl node install: containerd here has the runtime handler " + handler + " (the RuntimeClass " +
         handler + " selects nodes by this label)\n" + kRuntimeNodeLabel + "=" + handler + "\n";
}

std::vector<std::string> changed_since_install(const NodeInstallRecord& record, const std::string& root) {
  std::vector<std::string> changed;
  for (const InstalledFile& f : record.files) {
    const std::optional<std::string> now = file_sha256(under_root(root, f.path));
    if (now && *now != f.sha256)
      changed.push_back(f.path + (*now == "not a regular file" ? " (now not a regular file)" : " (edited)"));
  }
  return changed;
}

void run_node_install(const NodeInstallOptions& o) {
  const fs::path root = checked_host_root(o.host_root);
  check_host_path(o.containerd_config, "--containerd-config");
  check_host_path(o.cri_socket, "--cri-socket");
  if (!is_k8s_dns_label(o.handler))
    throw usage_error("--handler '" + o.handler +
                      "': expected a runtime handler's name (lowercase letters, digits, '-')");
  const std::vector<PlannedFile> planned = plan_files(o.source_dir.empty() ? program_dir() : fs::path(o.source_dir));

  NodeInstallRecord record = load_record(root).value_or(NodeInstallRecord{});
  if (!record.handler.empty() && (record.handler != o.handler || record.containerd_config != o.containerd_config))
    throw usage_error("gpu-run is installed here with the handler " + record.handler + " in " +
                      record.containerd_config + ": run `gpu-run-ctl node uninstall` first to change them");
  // Before anything is written: a file in the way that is not ours, or ours but edited since.
  std::vector<std::string> refused = changed_since_install(record, root.string());
  for (const PlannedFile& f : planned)
    if (!recorded(record, f.path) && file_sha256(under_root(root, f.path)))
      refused.push_back(f.path + " (not written by gpu-run-ctl node install)");
  if (!refused.empty()) {
    std::string list;
    for (const std::string& r : refused) list += (list.empty() ? "" : ", ") + r;
    throw usage_error("node install: " + list +
                      ": move it away (or uninstall the gpu-run package), then run again; nothing was changed");
  }
  record.version = GPU_RUN_VERSION;
  record.containerd_config = o.containerd_config;
  record.handler = o.handler;

  // The programs and profiles. A profile an older version installed and this one does not goes.
  std::vector<InstalledFile> kept;
  for (const InstalledFile& f : record.files) {
    const bool still =
        std::any_of(planned.begin(), planned.end(), [&](const PlannedFile& p) { return p.path == f.path; });
    const bool profile = f.path.rfind(std::string(kNodePrefix) + "/share/", 0) == 0;
    if (profile && !still)
      remove_installed(under_root(root, f.path));
    else if (!still || f.path == kNodeFeatureFile)
      kept.push_back(f);
  }
  record.files = kept;
  for (const PlannedFile& f : planned) {
    make_dirs(root, fs::path(f.path).parent_path(), record);
    write_file_atomic(under_root(root, f.path).string(), f.text, f.mode);
    record.files.push_back({f.path, sha256_hex(f.text)});
  }
  save_record(root, record);
  std::cout << "installed " << planned.size() << " files under " << kNodePrefix << "\n";

  // containerd's handler, by configure containerd in the host's root (its paths are the host's).
  const fs::path config_dir = under_root(root, fs::path(o.containerd_config).parent_path());
  const auto before = snapshot(config_dir);
  ConfigureContainerdOptions configure;
  configure.containerd_config = o.containerd_config;
  configure.handler = o.handler;
  configure.runtime_path = std::string(kNodePrefix) + "/bin/gpu-run-runtime";
  run_in_root(root, "configure containerd", [&] { run_configure_containerd(configure); });
  const auto after = snapshot(config_dir);
  const bool changed = before != after;
  record.containerd_configured = record.containerd_configured || changed;
  // The chain file configure writes stays after its --undo (containers started through it); the
  // node's uninstall takes it too.
  const std::string chain = chain_file_path(o.containerd_config, o.handler).string();
  if (const auto sum = file_sha256(under_root(root, chain));
      sum && (!before.count(under_root(root, chain).string()) || recorded(record, chain))) {
    record.files.erase(std::remove_if(record.files.begin(), record.files.end(),
                                      [&](const InstalledFile& f) { return f.path == chain; }),
                       record.files.end());
    record.files.push_back({chain, *sum});
  }
  save_record(root, record);

  if (changed && o.no_restart) {
    std::cout << "containerd's config changed: restart containerd on the node, then run `gpu-run-ctl node install` "
                 "again to label the node (a label before the restart would send pods to a handler containerd "
                 "does not have yet)\n";
    return;
  }
  if (changed) restart_and_wait(root, o.restart_command, o.cri_socket, o.cri_timeout);

  // The label, last: pods come once containerd has the handler. NFD skips dot-files, so the file
  // is written hidden and renamed into place.
  make_dirs(root, kNodeFeatureDir, record);
  const std::string text = node_feature_file_text(o.handler);
  const fs::path feature = under_root(root, kNodeFeatureFile);
  const fs::path hidden = feature.parent_path() / ("." + feature.filename().string());
  write_file_atomic(hidden.string(), text, 0644);
  if (::rename(hidden.c_str(), feature.c_str()) != 0) throw system_error("rename " + hidden.string(), errno);
  record.files.erase(std::remove_if(record.files.begin(), record.files.end(),
                                    [&](const InstalledFile& f) { return f.path == kNodeFeatureFile; }),
                     record.files.end());
  record.files.push_back({kNodeFeatureFile, sha256_hex(text)});
  save_record(root, record);
  std::cout << "wrote " << kNodeFeatureFile << ": Node Feature Discovery labels this node " << kRuntimeNodeLabel << "="
            << o.handler << "\n";
}

void run_node_uninstall(const NodeUninstallOptions& o) {
  const fs::path root = checked_host_root(o.host_root);
  check_host_path(o.cri_socket, "--cri-socket");
  const std::optional<NodeInstallRecord> loaded = load_record(root);
  if (!loaded) {
    std::cout << under_root(root, kNodeInstallRecord).string()
              << " does not exist: nothing installed here by gpu-run-ctl node install\n";
    return;
  }
  const NodeInstallRecord& record = *loaded;
  const std::vector<std::string> changed = changed_since_install(record, root.string());
  if (!changed.empty()) {
    std::string list;
    for (const std::string& c : changed) list += (list.empty() ? "" : ", ") + c;
    throw usage_error("node uninstall: changed since gpu-run-ctl node install wrote them: " + list +
                      ": put them back or remove them by hand, then run again; nothing was changed");
  }
  // configure --undo first: it refuses, changing nothing, when someone else edited the config.
  if (record.containerd_configured) {
    ConfigureContainerdOptions undo;
    undo.containerd_config = record.containerd_config;
    undo.handler = record.handler;
    undo.undo = true;
    run_in_root(root, "configure containerd --undo", [&] { run_configure_containerd(undo); });
  }
  remove_installed(under_root(root, kNodeFeatureFile));
  std::cout << "removed " << kNodeFeatureFile << " (Node Feature Discovery drops the label " << kRuntimeNodeLabel
            << ")\n";
  if (record.containerd_configured && !o.no_restart)
    restart_and_wait(root, o.restart_command, o.cri_socket, o.cri_timeout);
  else if (record.containerd_configured)
    std::cout << "restart containerd on the node: it still runs with the handler " << record.handler << "\n";
  for (const InstalledFile& f : record.files) remove_installed(under_root(root, f.path));
  remove_installed(under_root(root, kNodeInstallRecord));
  remove_dirs(root, record.directories);
  std::cout << "removed " << record.files.size() << " files and the record " << kNodeInstallRecord << "\n";
}

void add_node_command(CLI::App& app) {
  CLI::App* node = app.add_subcommand(
      "node", "Install gpu-run on a Kubernetes node from a container with the host's / mounted (the node installer)");
  node->require_subcommand(1);

  auto in = std::make_shared<NodeInstallOptions>();
  CLI::App* install = node->add_subcommand(
      "install",
      "Put the programs under /opt/gpu-run on the host, add containerd's handler, restart it, label the node");
  install->add_option("--host-root", in->host_root, "Where the host's / is mounted")->type_name("DIR")->required();
  install->add_flag("--no-restart", in->no_restart,
                    "Do not restart containerd (nor label the node while containerd has not loaded the handler)");
  install
      ->add_option("--restart-command", in->restart_command,
                   "Restart containerd with this shell command instead of systemctl through the host's PID 1")
      ->type_name("CMD");
  install->add_option("--containerd-config", in->containerd_config, "containerd's config.toml, as the host names it")
      ->type_name("PATH")
      ->capture_default_str();
  install->add_option("--cri-socket", in->cri_socket, "containerd's socket, as the host names it")
      ->type_name("PATH")
      ->capture_default_str();
  install->add_option("--handler", in->handler, "The runtime handler's name (the RuntimeClass's handler)")
      ->type_name("NAME")
      ->capture_default_str();
  install->add_option("--cri-timeout", in->cri_timeout, "Seconds to wait for containerd's CRI after the restart")
      ->type_name("SECONDS")
      ->capture_default_str();
  install->footer(
      "Copies gpu-run-runtime, gpu-run-hook, gpu-run-ctl, gpu-run and the built-in profiles from next to this\n"
      "program to DIR/opt/gpu-run, runs `gpu-run-ctl configure containerd` in DIR's root (the handler's\n"
      "BinaryName /opt/gpu-run/bin/gpu-run-runtime), restarts containerd when its config changed and waits\n"
      "until its CRI answers, then writes the Node Feature Discovery feature file\n"
      "DIR/etc/kubernetes/node-feature-discovery/features.d/gpu-run (label gpu-run.io/runtime=HANDLER). Every\n"
      "file written is recorded with its SHA-256 in DIR/var/lib/gpu-run/node-install.json. Running it again\n"
      "(a new version's installer) replaces the programs and restarts nothing when the config is unchanged.\n"
      "A file in the way that it did not write, or one it wrote and someone edited, is refused.");
  install->callback([in] { run_node_install(*in); });

  auto un = std::make_shared<NodeUninstallOptions>();
  CLI::App* uninstall = node->add_subcommand(
      "uninstall", "Take back everything `node install` did on the host, and refuse where a file changed since");
  uninstall->add_option("--host-root", un->host_root, "Where the host's / is mounted")->type_name("DIR")->required();
  uninstall->add_flag("--no-restart", un->no_restart, "Do not restart containerd");
  uninstall
      ->add_option("--restart-command", un->restart_command,
                   "Restart containerd with this shell command instead of systemctl through the host's PID 1")
      ->type_name("CMD");
  uninstall->add_option("--cri-socket", un->cri_socket, "containerd's socket, as the host names it")
      ->type_name("PATH")
      ->capture_default_str();
  uninstall->add_option("--cri-timeout", un->cri_timeout, "Seconds to wait for containerd's CRI after the restart")
      ->type_name("SECONDS")
      ->capture_default_str();
  uninstall->footer(
      "Reads DIR/var/lib/gpu-run/node-install.json and refuses, changing nothing, when a file it lists was\n"
      "edited since; else runs `configure containerd --undo` in DIR's root (which refuses when someone else\n"
      "changed containerd's config), removes the feature file, restarts containerd and waits for its CRI,\n"
      "then removes the programs, the profiles, the chain file, the record and the directories it made.\n"
      "Pods on the handler's RuntimeClass should be gone first: their containers stop through gpu-run-runtime.");
  uninstall->callback([un] { run_node_uninstall(*un); });
}

}  // namespace gpurun
