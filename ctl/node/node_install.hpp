#pragma once

// `gpu-run-ctl node install | uninstall --host-root DIR`: what the node installer's DaemonSet
// (gpu-run-ctl k8s node-manifests) does on each node, with the host's root mounted at DIR: the
// programs and built-in profiles under /opt/gpu-run, containerd's runtime handler (configure
// containerd, run in the host's root), containerd restarted, and a Node Feature Discovery
// feature file whose label the RuntimeClass selects nodes by. Every file it writes is recorded
// with its checksum in /var/lib/gpu-run/node-install.json, so that uninstall takes back exactly
// that, and refuses where someone else changed a file since.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gpurun {

// Where the installer puts things, as the host names them.
inline constexpr const char* kNodePrefix = "/opt/gpu-run";
inline constexpr const char* kNodeInstallRecord = "/var/lib/gpu-run/node-install.json";
inline constexpr const char* kNodeFeatureDir = "/etc/kubernetes/node-feature-discovery/features.d";
inline constexpr const char* kNodeFeatureFile = "/etc/kubernetes/node-feature-discovery/features.d/gpu-run";
inline constexpr const char* kDefaultCriSocket = "/run/containerd/containerd.sock";
// The programs the installer copies from next to itself.
inline constexpr const char* kNodePrograms[] = {"gpu-run-runtime", "gpu-run-hook", "gpu-run-ctl", "gpu-run"};

struct NodeInstallOptions {
  std::string host_root;                                          // --host-root DIR: the host's / (required)
  bool no_restart = false;                                        // containerd is restarted by someone else
  std::optional<std::string> restart_command;                     // else systemctl through the host's PID 1
  std::string containerd_config = "/etc/containerd/config.toml";  // as the host names it
  std::string cri_socket = kDefaultCriSocket;                     // as the host names it
  std::string handler = "gpu-run";
  unsigned cri_timeout = 120;  // seconds to wait for the CRI after the restart
  std::string source_dir;      // the programs to copy; empty: next to this program
};

// One file the installer wrote, as the host names it, with the SHA-256 of what it wrote.
struct InstalledFile {
  std::string path;
  std::string sha256;
};

// /var/lib/gpu-run/node-install.json.
struct NodeInstallRecord {
  std::string version;                   // the gpu-run that wrote it
  std::vector<InstalledFile> files;      // programs, profiles, the chain file, the feature file
  std::vector<std::string> directories;  // made by the installer, parents first
  std::string containerd_config;         // configure containerd's file
  std::string handler;                   // its runtime handler
  bool containerd_configured = false;    // configure changed containerd's config (uninstall undoes it)
};

nlohmann::ordered_json to_json(const NodeInstallRecord& record);

// Throws Error naming `source` when the text is not a record this version reads.
NodeInstallRecord parse_node_install_record(const std::string& text, const std::string& source);

// The feature file: one line, `gpu-run.io/runtime=<handler>` (NFD takes a prefixed name as the
// label's key unchanged), after a comment saying who wrote it. Pure.
std::string node_feature_file_text(const std::string& handler);

// The files of `record` that differ from what was written, as "PATH (what)": edited, or
// replaced by another kind of file. A missing file is not a change. Reads under `root`.
std::vector<std::string> changed_since_install(const NodeInstallRecord& record, const std::string& root);

void run_node_install(const NodeInstallOptions& options);

struct NodeUninstallOptions {
  std::string host_root;
  bool no_restart = false;
  std::optional<std::string> restart_command;
  std::string cri_socket = kDefaultCriSocket;
  unsigned cri_timeout = 120;
};

// Undoes every step the record names, in reverse: containerd's handler (configure --undo,
// which refuses when the config changed otherwise since), the feature file, the restart, the
// files and the directories the installer made (when empty). Refuses before changing anything
// when a recorded file changed since (naming each).
void run_node_uninstall(const NodeUninstallOptions& options);

// Registers `node` (install, uninstall) on `app`.
void add_node_command(CLI::App& app);

}  // namespace gpurun
