#include "ctl/node/node_install.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/file_io.hpp"
#include "base/temp_dir.hpp"
#include "ctl/k8s/k8s_node.hpp"
#include "ctl/node/host_root.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) { return read_small_file(p, 64 << 20, "test"); }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Every path below `root`, relative.
std::set<std::string> tree(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) out.insert(fs::relative(e.path(), root).string());
  return out;
}

// A host root with `config` as containerd's config.toml, and a source directory of stand-in
// programs (the installer copies bytes; configure containerd checks only that the runtime is
// executable) and two profiles.
class NodeInstallTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SKIP_UNLESS(::geteuid() == 0, "configure containerd runs chrooted into the host root: needs root");
    source_ = dir_.path() / "image" / "bin";
    for (const char* name : kNodePrograms) {
      write(source_ / name, std::string("#!/bin/sh\n# stand-in ") + name + "\n");
      fs::permissions(source_ / name, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    }
    write(dir_.path() / "image/share/gpu-run/profiles/imagenet.json", "{\"name\": \"imagenet\"}\n");
    write(dir_.path() / "image/share/gpu-run/profiles/default.json", "{\"name\": \"default\"}\n");
    root_ = dir_.path() / "host";
    original_ = read(fs::path(GPU_RUN_SOURCE_TEST_DATA) / "containerd" / GetParam());
    write(root_ / "etc/containerd/config.toml", original_);
    before_ = tree(root_);
    options_.host_root = root_.string();
    options_.no_restart = true;
    options_.source_dir = source_.string();
    un_.host_root = root_.string();
    un_.no_restart = true;
  }

  TempDir dir_{"node-install-test"};
  fs::path source_, root_;
  std::string original_;
  std::set<std::string> before_;
  NodeInstallOptions options_;
  NodeUninstallOptions un_;
};

TEST_P(NodeInstallTest, InstallThenUninstallLeavesTheHostAsItWas) {
  run_node_install(options_);
  EXPECT_EQ(read(root_ / "opt/gpu-run/bin/gpu-run-runtime"), read(source_ / "gpu-run-runtime"));
  EXPECT_EQ(read(root_ / "opt/gpu-run/share/gpu-run/profiles/imagenet.json"), "{\"name\": \"imagenet\"}\n");
  const std::string config = read(root_ / "etc/containerd/config.toml");
  EXPECT_NE(config.find("BinaryName = \"/opt/gpu-run/bin/gpu-run-runtime\""), std::string::npos) << config;
  // --no-restart and a changed config: no label before containerd has the handler.
  EXPECT_FALSE(fs::exists(root_ / "etc/kubernetes/node-feature-discovery/features.d/gpu-run"));
  // Again (after the restart someone else did): the config is unchanged, so the label is written.
  run_node_install(options_);
  EXPECT_EQ(read(root_ / "etc/containerd/config.toml"), config);
  EXPECT_EQ(read(root_ / "etc/kubernetes/node-feature-discovery/features.d/gpu-run"),
            node_feature_file_text("gpu-run"));
  const NodeInstallRecord record = parse_node_install_record(read(root_ / "var/lib/gpu-run/node-install.json"), "r");
  EXPECT_TRUE(record.containerd_configured);
  EXPECT_EQ(record.files.size(), 4u + 2u + 1u);
  EXPECT_TRUE(changed_since_install(record, root_.string()).empty());

  run_node_uninstall(un_);
  EXPECT_EQ(read(root_ / "etc/containerd/config.toml"), original_);
  EXPECT_EQ(tree(root_), before_);
}

TEST_P(NodeInstallTest, UninstallRefusesAnEditedFileAndChangesNothing) {
  run_node_install(options_);
  const std::string config = read(root_ / "etc/containerd/config.toml");
  write(root_ / "opt/gpu-run/bin/gpu-run-hook", "edited\n");
  const std::set<std::string> installed = tree(root_);
  const Error e = expect_error([&] { run_node_uninstall(un_); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_NE(std::string(e.what()).find("/opt/gpu-run/bin/gpu-run-hook (edited)"), std::string::npos) << e.what();
  EXPECT_EQ(read(root_ / "etc/containerd/config.toml"), config);
  EXPECT_EQ(tree(root_), installed);
}

TEST_P(NodeInstallTest, UninstallRefusesWhenContainerdsConfigWasEditedSince) {
  run_node_install(options_);
  const std::string edited = read(root_ / "etc/containerd/config.toml") + "\n[debug]\n  level = \"debug\"\n";
  write(root_ / "etc/containerd/config.toml", edited);
  EXPECT_NE(error_of([&] { run_node_uninstall(un_); }), "");
  EXPECT_EQ(read(root_ / "etc/containerd/config.toml"), edited);
  EXPECT_TRUE(fs::exists(root_ / "var/lib/gpu-run/node-install.json"));
  EXPECT_TRUE(fs::exists(root_ / "opt/gpu-run/bin/gpu-run-runtime"));
}

TEST_P(NodeInstallTest, InstallRefusesAFileItDidNotWrite) {
  write(root_ / "opt/gpu-run/bin/gpu-run", "someone else's\n");
  const std::set<std::string> mine = tree(root_);
  const Error e = expect_error([&] { run_node_install(options_); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_NE(std::string(e.what()).find("/opt/gpu-run/bin/gpu-run (not written by gpu-run-ctl node install)"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(tree(root_), mine);
  EXPECT_EQ(read(root_ / "etc/containerd/config.toml"), original_);
}

INSTANTIATE_TEST_SUITE_P(RealConfigs, NodeInstallTest, ::testing::Values("debian-stock.toml", "kubeadm.toml"));

TEST(NodeInstallRecordTest, ABadRecordIsNamed) {
  const Error e = expect_error([] { parse_node_install_record("{\"record_version\": 1}", "/x/node-install.json"); });
  EXPECT_EQ(e.exit_code(), 2);
  EXPECT_NE(std::string(e.what()).find("/x/node-install.json: not a node install record"), std::string::npos);
}

TEST(NodeInstallTest, UninstallWithoutARecordDoesNothing) {
  TempDir dir("node-install-test");
  NodeUninstallOptions o;
  o.host_root = dir.path().string();
  run_node_uninstall(o);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(NodeInstallTest, AMissingHostRootIsRefused) {
  NodeInstallOptions o;
  o.host_root = "/nonexistent/host";
  EXPECT_NE(error_of([&] { run_node_install(o); }).find("--host-root '/nonexistent/host': not a directory"),
            std::string::npos);
}

TEST(CriProbeTest, NoSocketOrNotGrpcIsNoAnswer) {
  TempDir dir("cri-probe-test");
  std::string why;
  EXPECT_FALSE(cri_answers(dir.path() / "none.sock", std::chrono::milliseconds(200), why));
  EXPECT_NE(why.find("connect"), std::string::npos) << why;
  // A socket that accepts and closes: not a CRI.
  const fs::path path = dir.path() / "closed.sock";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  EXPECT_FALSE(cri_answers(path, std::chrono::milliseconds(300), why));
  ::close(s);
  const Error e = expect_error([&] { wait_for_cri(dir.path() / "none.sock", std::chrono::seconds(0)); });
  EXPECT_NE(std::string(e.what()).find("did not answer within 0 s"), std::string::npos) << e.what();
}

TEST(NodeManifestsTest, AnInstallerOnGpuNodesWithoutRbac) {
  const auto objects = node_manifests(NodeManifestOptions{});
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0]["kind"], "Namespace");
  EXPECT_EQ(objects[1]["kind"], "DaemonSet");
  EXPECT_EQ(objects[2]["kind"], "RuntimeClass");
  EXPECT_EQ(objects[2]["scheduling"]["nodeSelector"]["gpu-run.io/runtime"], "gpu-run");
  const auto& pod = objects[1]["spec"]["template"]["spec"];
  EXPECT_EQ(pod["automountServiceAccountToken"], false);
  EXPECT_EQ(pod["initContainers"][0]["args"][0], "node");
  EXPECT_EQ(pod["initContainers"][0]["args"][1], "install");
  const auto& terms =
      pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0]["matchExpressions"][0]["key"], "nvidia.com/gpu.present");
  for (const auto& o : objects) EXPECT_NE(o["kind"], "ClusterRole");
  NodeManifestOptions un;
  un.uninstall = true;
  const auto removal = node_manifests(un);
  ASSERT_EQ(removal.size(), 2u);
  EXPECT_EQ(removal[1]["spec"]["template"]["spec"]["initContainers"][0]["args"][1], "uninstall");
  EXPECT_EQ(removal[1]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                   ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                       .size(),
            2u);
}

}  // namespace
}  // namespace gpurun
