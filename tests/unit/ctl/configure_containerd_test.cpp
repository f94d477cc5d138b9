#include "ctl/configure/configure_containerd.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <toml.hpp>
#include <vector>

#include "base/error.hpp"
#include "decision/contract.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

constexpr const char* kContainerdRuntime = "/usr/bin/gpu-run-runtime";
constexpr const char* kV2Runtimes = R"(plugins."io.containerd.grpc.v1.cri".containerd.runtimes)";

// The file as containerd would read it (no comments, any order).
toml::value parsed(const std::string& text) {
  std::istringstream in(text);
  return toml::parse(in, "out.toml");
}

// `text` as another writer formats it: no comments, toml11's own layout.
std::string parsed_text(const std::string& text) { return toml::format(parsed(text)); }

const toml::value& runtimes(const toml::value& doc, const std::string& plugin = "io.containerd.grpc.v1.cri") {
  return doc.at("plugins").at(plugin).at("containerd").at("runtimes");
}

std::vector<std::string> strings(const toml::value& array) {
  std::vector<std::string> out;
  for (const auto& v : array.as_array()) out.push_back(v.as_string());
  return out;
}

ContainerdEdit merge(const std::string& text, const std::string& handler = "gpu-run") {
  return merge_containerd_config(text, "config.toml", kContainerdRuntime, handler);
}

// A kubeadm-style config: comments, other plugins, runc with the systemd cgroup driver, another
// handler (the integration test gives the same file to the real containerd).
std::string node_config() {
  return test::read_text(std::string(GPU_RUN_SOURCE_TEST_DATA) + "/containerd/kubeadm.toml");
}

TEST(ContainerdConfig, AddsTheHandlerAndKeepsCommentsAndEveryOtherSetting) {
  const ContainerdEdit edit = merge(node_config());
  EXPECT_TRUE(edit.file.changed);
  EXPECT_EQ(edit.version, 2);
  EXPECT_EQ(edit.table, std::string(kV2Runtimes) + ".gpu-run");
  for (const char* comment :
       {"# node config, managed by hand", "# the kubelet's endpoint", "# pinned for the air-gapped cluster"})
    EXPECT_CONTAINS(edit.file.text, comment);
  // Each comment stays with its key (an end-of-line comment moves above it).
  EXPECT_CONTAINS(edit.file.text, "# pinned for the air-gapped cluster\nsandbox_image = ");
  EXPECT_CONTAINS(edit.file.text, "# the kubelet's endpoint\naddress = ");

  const toml::value doc = parsed(edit.file.text);
  EXPECT_EQ(doc.at("version").as_integer(), 2);
  EXPECT_EQ(doc.at("root").as_string(), "/var/lib/containerd");
  EXPECT_EQ(doc.at("grpc").at("address").as_string(), "/run/containerd/containerd.sock");
  EXPECT_EQ(doc.at("plugins").at("io.containerd.grpc.v1.cri").at("sandbox_image").as_string(),
            "registry.local/pause:3.9");
  const toml::value& rt = runtimes(doc);
  EXPECT_EQ(rt.at("nvidia").at("options").at("BinaryName").as_string(), "/usr/bin/nvidia-container-runtime");
  EXPECT_TRUE(rt.at("runc").at("options").at("SystemdCgroup").as_boolean());

  const toml::value& ours = rt.at("gpu-run");
  EXPECT_EQ(ours.at("runtime_type").as_string(), "io.containerd.runc.v2");
  EXPECT_EQ(strings(ours.at("pod_annotations")), request_annotation_globs());
  EXPECT_EQ(ours.at("options").at("BinaryName").as_string(), kContainerdRuntime);
  // The node's cgroup driver, from the default runtime.
  EXPECT_TRUE(ours.at("options").at("SystemdCgroup").as_boolean());
}

TEST(ContainerdConfig, KeepsACommentOnTheFilesLastLine) {
  const std::string text = node_config() + "# end of the node config\n";
  const ContainerdEdit edit = merge(text);
  EXPECT_CONTAINS(edit.file.text, "# end of the node config\n");
  EXPECT_TRUE(runtimes(parsed(edit.file.text)).contains("gpu-run"));
  // Without a newline at the end too; and the edited file keeps it once.
  EXPECT_CONTAINS(merge(node_config() + "# last").file.text, "# last\n");
  EXPECT_FALSE(merge(edit.file.text).file.changed);
  const std::string again =
      merge_containerd_config(edit.file.text, "config.toml", "/opt/gpu-run-runtime", "gpu-run").file.text;
  EXPECT_EQ(again.find("# end of the node config"), again.rfind("# end of the node config"));
}

TEST(ContainerdConfig, KeepsCommentsThatABlankLineFollows) {
  // The last table ends with a comment line and a blank line; another comment is followed by a
  // blank line before its key, and one ends a table in the middle of the file.
  const std::string text = R"(version = 2

[grpc]
  # the kubelet's endpoint, not the default one

  address = "/run/containerd/containerd.sock"
  # keep in step with the kubelet's --container-runtime-endpoint

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  # runc: the node's default

)";
  const ContainerdEdit edit = merge(text);
  for (const char* comment :
       {"# the kubelet's endpoint, not the default one",
        "# keep in step with the kubelet's --container-runtime-endpoint", "# runc: the node's default"})
    EXPECT_CONTAINS(edit.file.text, comment);
  // In the file's order.
  EXPECT_LT(edit.file.text.find("# the kubelet's endpoint"), edit.file.text.find("address = "));
  EXPECT_LT(edit.file.text.find("address = "), edit.file.text.find("# keep in step"));
  EXPECT_LT(edit.file.text.find("# keep in step"), edit.file.text.find("runtimes.runc]"));
  EXPECT_LT(edit.file.text.find("runtimes.runc]"), edit.file.text.find("# runc: the node's default"));
  const toml::value doc = parsed(edit.file.text);
  EXPECT_EQ(doc.at("grpc").at("address").as_string(), "/run/containerd/containerd.sock");
  EXPECT_EQ(runtimes(doc).at("gpu-run").at("options").at("BinaryName").as_string(), kContainerdRuntime);
}

TEST(ContainerdConfig, ALineLikeACommentInAMultiLineStringIsNotOne) {
  const std::string text =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n"
      "conf_template = \"\"\"a\n# b\n\nc\n# d\"\"\"\n";
  const ContainerdEdit edit = merge(text);
  EXPECT_EQ(
      parsed(edit.file.text).at("plugins").at("io.containerd.grpc.v1.cri").at("cni").at("conf_template").as_string(),
      "a\n# b\n\nc\n# d");
}

TEST(ContainerdConfig, KeepsTheFilesOrderOfTables) {
  const std::string text = merge(node_config()).file.text;
  const auto grpc = text.find("[grpc]");
  const auto runc = text.find("runtimes.runc]");
  const auto nvidia = text.find("runtimes.nvidia]");
  const auto ours = text.find("runtimes.gpu-run]");
  ASSERT_NE(ours, std::string::npos);
  EXPECT_LT(grpc, runc);
  EXPECT_LT(runc, nvidia);
  EXPECT_LT(nvidia, ours);
}

TEST(ContainerdConfig, IsIdempotent) {
  const ContainerdEdit first = merge(node_config());
  const ContainerdEdit second = merge(first.file.text);
  EXPECT_FALSE(second.file.changed);
  EXPECT_TRUE(second.file.notes.empty());
  // A missing file too: the second run finds it configured.
  const ContainerdEdit created = merge_containerd_config(std::nullopt, "c.toml", kContainerdRuntime, "gpu-run");
  EXPECT_FALSE(merge(created.file.text).file.changed);
}

TEST(ContainerdConfig, UpdatesADifferentHandlerAndSaysWhatChanged) {
  std::string text = merge(node_config()).file.text;
  text = merge_containerd_config(text, "config.toml", "/opt/gpu-run/bin/gpu-run-runtime", "gpu-run").file.text;
  const ContainerdEdit edit = merge(text);
  EXPECT_TRUE(edit.file.changed);
  ASSERT_EQ(edit.file.notes.size(), 1u);
  EXPECT_CONTAINS(edit.file.notes[0], ".gpu-run.options.BinaryName was \"/opt/gpu-run/bin/gpu-run-runtime\"");
  EXPECT_CONTAINS(edit.file.notes[0], kContainerdRuntime);
  EXPECT_EQ(runtimes(parsed(edit.file.text)).at("gpu-run").at("options").at("BinaryName").as_string(),
            kContainerdRuntime);
}

TEST(ContainerdConfig, KeepsTheUsersExtraPodAnnotationsAndAddsOurs) {
  const std::string text = R"(version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu-run]
  runtime_type = "io.containerd.runc.v1"
  pod_annotations = ["example.com/*", "gpu-run.*"]
  privileged_without_host_devices = true
)";
  const ContainerdEdit edit = merge(text);
  const toml::value doc = parsed(edit.file.text);
  const toml::value& ours = runtimes(doc).at("gpu-run");
  EXPECT_EQ(strings(ours.at("pod_annotations")),
            (std::vector<std::string>{"example.com/*", "gpu-run.*", kCrioShmSizeAnnotation}));
  EXPECT_EQ(ours.at("runtime_type").as_string(), "io.containerd.runc.v2");
  EXPECT_TRUE(ours.at("privileged_without_host_devices").as_boolean());
  std::string notes;
  for (const auto& n : edit.file.notes) notes += n + "\n";
  EXPECT_CONTAINS(notes, "runtime_type was \"io.containerd.runc.v1\", now \"io.containerd.runc.v2\"");
  EXPECT_CONTAINS(notes, "pod_annotations: added \"io.kubernetes.cri-o.ShmSize\"");
}

TEST(ContainerdConfig, AMultiLineStringKeepsItsEmptyLines) {
  const std::string text =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_template = \"\"\"a\n\n\n\nb\"\"\"\n";
  const ContainerdEdit edit = merge(text);
  EXPECT_EQ(
      parsed(edit.file.text).at("plugins").at("io.containerd.grpc.v1.cri").at("cni").at("conf_template").as_string(),
      "a\n\n\n\nb");
  EXPECT_FALSE(merge(edit.file.text).file.changed);
}

TEST(ContainerdConfig, MissingOrEmptyFileBecomesAMinimalVersion2Config) {
  for (const std::optional<std::string>& existing :
       {std::optional<std::string>(), std::optional<std::string>(""), std::optional<std::string>("# nothing yet\n")}) {
    const ContainerdEdit edit = merge_containerd_config(existing, "c.toml", kContainerdRuntime, "gpu-run");
    EXPECT_TRUE(edit.file.changed);
    const toml::value doc = parsed(edit.file.text);
    EXPECT_EQ(doc.at("version").as_integer(), 2);
    // containerd drops its built-in runc once the file names a runtime: runc is written too.
    EXPECT_EQ(runtimes(doc).at("runc").at("runtime_type").as_string(), "io.containerd.runc.v2");
    EXPECT_EQ(runtimes(doc).at("gpu-run").at("options").at("BinaryName").as_string(), kContainerdRuntime);
  }
}

TEST(ContainerdConfig, DebianDefaultConfigGetsRuncBecauseItNamesNoRuntime) {
  // /etc/containerd/config.toml as Debian 12's containerd package ships it.
  const ContainerdEdit edit =
      merge(test::read_text(std::string(GPU_RUN_SOURCE_TEST_DATA) + "/containerd/debian-stock.toml"));

  const toml::value doc = parsed(edit.file.text);
  EXPECT_EQ(runtimes(doc).at("runc").at("runtime_type").as_string(), "io.containerd.runc.v2");
  EXPECT_FALSE(runtimes(doc).at("gpu-run").at("options").contains("SystemdCgroup"));
  EXPECT_EQ(doc.at("plugins").at("io.containerd.internal.v1.opt").at("path").as_string(), "/var/lib/containerd/opt");
  ASSERT_FALSE(edit.file.notes.empty());
  EXPECT_CONTAINS(edit.file.notes[0], "runtimes.runc");
}

TEST(ContainerdConfig, AnotherDefaultRuntimeWithoutItsTableIsRefused) {
  const std::string text = R"(version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
)";
  const Error e = expect_error([&] { merge(text); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "config.toml: ");
  EXPECT_CONTAINS(e.what(), "default_runtime_name is \"nvidia\"");
}

TEST(ContainerdConfig, Version3UsesTheCriRuntimePlugin) {
  const std::string text = R"(version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
)";
  const ContainerdEdit edit = merge(text);
  EXPECT_EQ(edit.version, 3);
  EXPECT_EQ(edit.table, R"(plugins."io.containerd.cri.v1.runtime".containerd.runtimes.gpu-run)");
  const toml::value doc = parsed(edit.file.text);
  EXPECT_EQ(doc.at("version").as_integer(), 3);
  const toml::value& ours = runtimes(doc, "io.containerd.cri.v1.runtime").at("gpu-run");
  EXPECT_EQ(ours.at("runtime_type").as_string(), "io.containerd.runc.v2");
  EXPECT_EQ(ours.at("options").at("BinaryName").as_string(), kContainerdRuntime);
  EXPECT_EQ(strings(ours.at("pod_annotations")), request_annotation_globs());
  EXPECT_FALSE(doc.at("plugins").contains("io.containerd.grpc.v1.cri"));
  EXPECT_EQ(doc.at("plugins").at("io.containerd.cri.v1.images").at("snapshotter").as_string(), "overlayfs");
  EXPECT_FALSE(merge(edit.file.text).file.changed);
}

TEST(ContainerdConfig, Version1AndUnknownVersionsAreRefused) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"version = 1\n[plugins.cri]\n", "config version 1"}, Case{"[plugins.cri]\n", "no `version = 2` line"},
        Case{"version = 4\n", "unknown config version 4"}, Case{"version = \"2\"\n", "key version: expected 2 or 3"}}) {
    const Error e = expect_error([&] { merge(c.text); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << c.text;
    EXPECT_CONTAINS(e.what(), c.says);
    EXPECT_CONTAINS(e.what(), "leaves the file as it is");
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(ContainerdConfig, MalformedTomlIsOneLineWithFileAndLine) {
  const Error e = expect_error([] {
    merge_containerd_config(std::string("version = 2\n[plugins\n"), "/etc/c.toml", kContainerdRuntime, "gpu-run");
  });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "/etc/c.toml:2: ");
  EXPECT_CONTAINS(e.what(), "key");
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  const Error twice = expect_error([] { merge(std::string("version = 2\nroot = \"a\"\nroot = \"b\"\n")); });
  EXPECT_CONTAINS(twice.what(), "config.toml:3: ");
}

TEST(ContainerdConfig, WrongShapesOnTheWayAreRefusedNamingTheKey) {
  const Error e = expect_error([] { merge("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\ncontainerd = 1\n"); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), R"(plugins."io.containerd.grpc.v1.cri".containerd: expected a table, got integer)");
  const Error array = expect_error([] {
    merge(node_config() +
          "      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.gpu-run]\n"
          "        pod_annotations = \"gpu-run.*\"\n");
  });
  EXPECT_CONTAINS(array.what(), "pod_annotations: expected an array of strings");
}

TEST(ContainerdConfig, HandlerNameMustBeADnsLabel) {
  for (const char* bad : {"", "GPU", "gpu_run", "a.b", "-x"}) {
    const Error e = expect_error([&] { merge(node_config(), bad); });
    EXPECT_EQ(e.exit_code(), kExitUsage) << bad;
    EXPECT_CONTAINS(e.what(), "--handler");
  }
  const ContainerdEdit edit = merge(node_config(), "gpu-run-b");
  EXPECT_TRUE(runtimes(parsed(edit.file.text)).contains("gpu-run-b"));
}

// What the GPU Operator's toolkit (nvidia-ctk-installer) leaves in config.toml: handlers nvidia,
// nvidia-cdi and nvidia-legacy copied from runc's table, their BinaryName under the toolkit's
// directory, "nvidia" the default.
std::string gpu_operator_config() {
  return R"(version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
    privileged_without_host_devices = false
    runtime_engine = ""
    runtime_root = ""
    runtime_type = "io.containerd.runc.v2"
    container_annotations = ["cdi.k8s.io/*"]
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi]
    runtime_type = "io.containerd.runc.v2"
    container_annotations = ["cdi.k8s.io/*"]
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi.options]
      BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-legacy]
    runtime_type = "io.containerd.runc.v2"
    container_annotations = ["cdi.k8s.io/*"]
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-legacy.options]
      BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy"
      SystemdCgroup = true
)";
}

TEST(ContainerdDefaultRuntime, FindsTheGpuOperatorsDefaultHandlerAndItsBinary) {
  const DefaultRuntime d = containerd_default_runtime(gpu_operator_config(), "config.toml", "gpu-run");
  EXPECT_EQ(d.name, "nvidia");
  EXPECT_EQ(d.binary, "/usr/local/nvidia/toolkit/nvidia-container-runtime");
  EXPECT_FALSE(d.is_entry);
  EXPECT_CONTAINS(d.where, "containerd's default runtime \"nvidia\"");
  // runc: the built-in (no table, or a table without BinaryName), and no file at all.
  for (const std::optional<std::string>& text :
       {std::optional<std::string>(), std::optional<std::string>(node_config()),
        std::optional<std::string>(
            test::read_text(std::string(GPU_RUN_SOURCE_TEST_DATA) + "/containerd/debian-stock.toml"))}) {
    const DefaultRuntime runc = containerd_default_runtime(text, "config.toml", "gpu-run");
    EXPECT_EQ(runc.name, "runc");
    EXPECT_EQ(runc.binary, "");
  }
  // The handler is the default itself: what it runs stays.
  const std::string ours = R"(version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "gpu-run"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gpu-run.options]
    BinaryName = "/etc/containerd/gpu-run-runtime.gpu-run"
)";
  const DefaultRuntime entry = containerd_default_runtime(ours, "config.toml", "gpu-run");
  EXPECT_TRUE(entry.is_entry);
  EXPECT_EQ(entry.binary, "/etc/containerd/gpu-run-runtime.gpu-run");
}

TEST(ContainerdDefaultRuntime, AHandlerThatIsNotRuncsShimIsRefused) {
  const std::string kata = R"(version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "kata"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
    runtime_type = "io.containerd.kata.v2"
)";
  const Error e = expect_error([&] { containerd_default_runtime(kata, "/etc/containerd/config.toml", "gpu-run"); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(),
                  "/etc/containerd/config.toml: the default runtime \"kata\" has runtime_type "
                  "\"io.containerd.kata.v2\", not the runc shim");
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  const Error missing = expect_error([] {
    containerd_default_runtime(std::string("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
                                           "  default_runtime_name = \"nvidia\"\n"),
                               "c.toml", "gpu-run");
  });
  EXPECT_CONTAINS(missing.what(), "default_runtime_name is \"nvidia\" but");
}

TEST(ContainerdConfig, TheHandlerCopiesTheDefaultHandlersSettingsAndRunsTheChainFile) {
  const ContainerdEdit edit = merge_containerd_config(gpu_operator_config(), "config.toml",
                                                      "/etc/containerd/gpu-run-runtime.gpu-run", "gpu-run");
  const toml::value doc = parsed(edit.file.text);
  const toml::value& ours = runtimes(doc).at("gpu-run");
  EXPECT_EQ(ours.at("options").at("BinaryName").as_string(), "/etc/containerd/gpu-run-runtime.gpu-run");
  EXPECT_TRUE(ours.at("options").at("SystemdCgroup").as_boolean());
  EXPECT_FALSE(ours.at("privileged_without_host_devices").as_boolean());
  EXPECT_EQ(ours.at("runtime_root").as_string(), "");
  EXPECT_EQ(strings(ours.at("container_annotations")), std::vector<std::string>{"cdi.k8s.io/*"});
  EXPECT_EQ(strings(ours.at("pod_annotations")), request_annotation_globs());
  EXPECT_EQ(ours.at("runtime_type").as_string(), "io.containerd.runc.v2");
  // The default stays NVIDIA's; its handlers are as they were.
  EXPECT_EQ(doc.at("plugins").at("io.containerd.grpc.v1.cri").at("containerd").at("default_runtime_name").as_string(),
            "nvidia");
  EXPECT_EQ(runtimes(doc).at("nvidia").at("options").at("BinaryName").as_string(),
            "/usr/local/nvidia/toolkit/nvidia-container-runtime");
  EXPECT_TRUE(edit.file.first);
  const ContainerdEdit again =
      merge_containerd_config(edit.file.text, "config.toml", "/etc/containerd/gpu-run-runtime.gpu-run", "gpu-run");
  EXPECT_FALSE(again.file.changed);
  EXPECT_FALSE(again.file.first);
}

TEST(ContainerdConfig, ListsTheHandlersWithTheirBinaries) {
  const std::vector<NamedRuntime> all = containerd_runtimes(gpu_operator_config(), "c.toml");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].name, "runc");
  EXPECT_EQ(all[0].binary, "");
  EXPECT_EQ(all[3].name, "nvidia-legacy");
  EXPECT_EQ(all[3].binary, "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy");
  EXPECT_TRUE(containerd_runtimes(std::nullopt, "c.toml").empty());
}

TEST(ContainerdUndo, GivesBackTheBackupByteForByte) {
  for (const std::string& before :
       {node_config(), gpu_operator_config(),
        test::read_text(std::string(GPU_RUN_SOURCE_TEST_DATA) + "/containerd/debian-stock.toml"),
        std::string("# nothing yet\n")}) {
    const ContainerdEdit edit = merge(before);
    const UndoEdit undo = undo_containerd_config(edit.file.text, before, "config.toml", "gpu-run");
    EXPECT_EQ(undo.kind, UndoEdit::kRestore) << before;
    EXPECT_EQ(undo.text, before);
    EXPECT_EQ(undo.entry_binary, kContainerdRuntime);
  }
}

TEST(ContainerdUndo, AFileConfigureCreatedIsRemoved) {
  const ContainerdEdit created = merge_containerd_config(std::nullopt, "c.toml", kContainerdRuntime, "gpu-run");
  const UndoEdit undo = undo_containerd_config(created.file.text, std::nullopt, "c.toml", "gpu-run");
  EXPECT_EQ(undo.kind, UndoEdit::kRemove);
  EXPECT_EQ(undo_containerd_config(node_config(), std::nullopt, "c.toml", "gpu-run").kind, UndoEdit::kNothing);
  EXPECT_EQ(undo_containerd_config(std::nullopt, std::nullopt, "c.toml", "gpu-run").kind, UndoEdit::kNothing);
}

TEST(ContainerdUndo, AFileChangedOtherwiseIsRefusedNamingTheKey) {
  const std::string before = gpu_operator_config();
  const std::string after = merge(before).file.text;
  // Another handler since (a toolkit upgrade), and an edit of runc's options.
  struct Case {
    std::string text;
    const char* says;
  };
  for (const Case& c : {Case{after + "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata]\nruntime_type = "
                                     "\"io.containerd.kata.v2\"\n",
                             "(key plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata added)"},
                        Case{std::string("root = \"/data/containerd\"\n") + after, "(key root added)"}}) {
    const Error e =
        expect_error([&] { undo_containerd_config(c.text, before, "/etc/containerd/config.toml", "gpu-run"); });
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_CONTAINS(e.what(), "/etc/containerd/config.toml changed since gpu-run-ctl configure wrote it ");
    EXPECT_CONTAINS(e.what(), c.says);
    EXPECT_CONTAINS(e.what(), "remove [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.gpu-run] by hand");
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  // Comments and layout are not a change: a file the toolkit rewrote the same is restored.
  EXPECT_EQ(undo_containerd_config(parsed_text(after), before, "c.toml", "gpu-run").kind, UndoEdit::kRestore);
}

TEST(ContainerdConfig, ATomlGivenAsGpuRunsConfigIsRefusedNamingTheRightOption) {
  ConfigureContainerdOptions o;
  o.config = "/etc/containerd/config.toml";
  const Error e = expect_error([&] { run_configure_containerd(o); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "give containerd's config.toml as --containerd-config");
}

// --- drop-ins: config.toml's imports, as containerd reads them ------------------------------------

constexpr const char* kNvidia = "/usr/bin/nvidia-container-runtime";
constexpr const char* kEntry = "/etc/containerd/gpu-run-runtime.gpu-run";

std::string nvidia_fixture(const std::string& version, const std::string& file) {
  return test::read_text(std::string(GPU_RUN_SOURCE_TEST_DATA) + "/containerd/nvidia-ctk-1.18/" + version + "/" + file);
}

// A host root holding /etc/containerd as NVIDIA's toolkit 1.18 leaves it (config version "v2" or "v3").
struct Host {
  test::TempDir root;
  fs::path config() const { return root / "etc/containerd/config.toml"; }
  fs::path conf_d(const std::string& name) const { return root / "etc/containerd/conf.d" / name; }
  ContainerdSources sources(const std::string& handler = "gpu-run") const {
    return read_containerd_sources(config(), handler, root.path());
  }
  explicit Host(const std::string& version) {
    root.write("etc/containerd/config.toml", nvidia_fixture(version, "config.toml"));
    root.write("etc/containerd/conf.d/99-nvidia.toml", nvidia_fixture(version, "99-nvidia.toml"));
  }
};

std::vector<std::string> source_names(const ContainerdSources& s) {
  std::vector<std::string> out;
  for (const ContainerdSource& f : s.files)
    out.push_back(fs::path(f.path).filename().string() + (f.dropin ? (f.text ? " (ours)" : " (ours, new)") : ""));
  return out;
}

std::vector<std::string> names_of(const std::vector<NamedRuntime>& runtimes) {
  std::vector<std::string> out;
  for (const NamedRuntime& r : runtimes) out.push_back(r.name + "=" + r.binary);
  std::sort(out.begin(), out.end());
  return out;
}

const toml::value& cri(const toml::value& doc, const std::string& plugin = "io.containerd.grpc.v1.cri") {
  return doc.at("plugins").at(plugin);
}

TEST(ContainerdDropin, FollowsTheImportAndPutsGpuRunsDropinAfterNvidias) {
  const Host host("v2");
  const ContainerdSources s = host.sources();
  EXPECT_EQ(source_names(s),
            (std::vector<std::string>{"config.toml", "99-nvidia.toml", "99-zz-gpu-run.toml (ours, new)"}));
  EXPECT_EQ(s.files[2].path, host.conf_d("99-zz-gpu-run.toml").string());
  EXPECT_EQ(containerd_dropin_name("shm"), "99-zz-gpu-run-shm.toml");
  // config.toml alone says runc; containerd reads NVIDIA's drop-in after it.
  EXPECT_EQ(containerd_default_runtime(*s.files[0].text, "config.toml", "gpu-run").name, "runc");
  const DefaultRuntime d = containerd_chained_runtime(s, "gpu-run", std::nullopt);
  EXPECT_EQ(d.name, "nvidia");
  EXPECT_EQ(d.binary, kNvidia);
  EXPECT_CONTAINS(d.where, host.conf_d("99-nvidia.toml").string());
}

TEST(ContainerdDropin, Version2DropinCarriesTheWholeCriSectionAndTheHandler) {
  const Host host("v2");
  const std::string before = test::read_text(host.config().string());
  const ContainerdPlan plan = plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt);
  ASSERT_TRUE(plan.dropin);
  EXPECT_EQ(plan.path, host.conf_d("99-zz-gpu-run.toml").string());
  EXPECT_TRUE(plan.edit.file.changed);
  EXPECT_TRUE(plan.warnings.empty());
  EXPECT_EQ(plan.stale, "");
  const std::string& text = plan.edit.file.text;
  EXPECT_EQ(text.rfind("# Written by `gpu-run-ctl configure containerd`", 0), 0U) << text;
  EXPECT_CONTAINS(text, "carries the CRI section of " + host.conf_d("99-nvidia.toml").string());
  const toml::value doc = parsed(text);
  EXPECT_EQ(doc.at("version").as_integer(), 2);
  // Everything NVIDIA's drop-in says, as containerd 1.x replaces the whole section with this one.
  EXPECT_EQ(cri(doc).at("sandbox_image").as_string(), "registry.k8s.io/pause:3.9");
  EXPECT_EQ(cri(doc).at("containerd").at("default_runtime_name").as_string(), "nvidia");
  EXPECT_EQ(runtimes(doc).at("nvidia").at("options").at("BinaryName").as_string(), kNvidia);
  EXPECT_TRUE(runtimes(doc).at("runc").at("options").at("SystemdCgroup").as_boolean());
  // gpu-run's handler: the chain file, NVIDIA's handler's options.
  const toml::value& ours = runtimes(doc).at("gpu-run");
  EXPECT_EQ(ours.at("options").at("BinaryName").as_string(), kEntry);
  EXPECT_TRUE(ours.at("options").at("SystemdCgroup").as_boolean());
  EXPECT_EQ(strings(ours.at("pod_annotations")), request_annotation_globs());
  EXPECT_EQ(test::read_text(host.config().string()), before);  // plan_containerd writes nothing
}

TEST(ContainerdDropin, AWrittenDropinIsIdempotentAndNoticesAnotherToolRewritingTheSection) {
  const Host host("v2");
  const ContainerdPlan first = plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt);
  host.root.write("etc/containerd/conf.d/99-zz-gpu-run.toml", first.edit.file.text);
  EXPECT_EQ(source_names(host.sources()),
            (std::vector<std::string>{"config.toml", "99-nvidia.toml", "99-zz-gpu-run.toml (ours)"}));
  const ContainerdPlan again = plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt);
  EXPECT_FALSE(again.edit.file.changed);
  EXPECT_FALSE(again.edit.file.first);
  EXPECT_EQ(containerd_dropin_stale(host.sources(), "gpu-run"), "");
  // The effective handlers: NVIDIA's, runc and gpu-run's, all from gpu-run's drop-in.
  EXPECT_EQ(names_of(containerd_effective_runtimes(host.sources())),
            (std::vector<std::string>{"gpu-run=" + std::string(kEntry), "nvidia=" + std::string(kNvidia), "runc="}));

  // The toolkit rewrites its drop-in (an upgrade moves the binary): gpu-run's copy is stale.
  std::string moved = nvidia_fixture("v2", "99-nvidia.toml");
  moved.replace(moved.find(kNvidia), std::string(kNvidia).size(), "/usr/local/nvidia/toolkit/nvidia-container-runtime");
  host.root.write("etc/containerd/conf.d/99-nvidia.toml", moved);
  const std::string stale = containerd_dropin_stale(host.sources(), "gpu-run");
  EXPECT_CONTAINS(stale,
                  R"(key plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options.BinaryName changed)");
  const ContainerdPlan rewritten = plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt);
  EXPECT_EQ(rewritten.stale, stale);
  EXPECT_TRUE(rewritten.edit.file.changed);
  EXPECT_CONTAINS(rewritten.edit.file.text, "/usr/local/nvidia/toolkit/nvidia-container-runtime");
  EXPECT_EQ(containerd_chained_runtime(host.sources(), "gpu-run", std::nullopt).binary,
            "/usr/local/nvidia/toolkit/nvidia-container-runtime");
  // A handler the toolkit adds is named as added (what the files say now, against the copy).
  host.root.write("etc/containerd/conf.d/99-zz-gpu-run.toml", first.edit.file.text);
  host.root.write("etc/containerd/conf.d/99-nvidia.toml",
                  nvidia_fixture("v2", "99-nvidia.toml") +
                      "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia-cdi]\nruntime_type = "
                      "\"io.containerd.runc.v2\"\n");
  EXPECT_EQ(containerd_dropin_stale(host.sources(), "gpu-run"),
            R"(key plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-cdi added)");
}

TEST(ContainerdDropin, Version3DropinIsTheHandlerAloneAsContainerd2MergesKeyByKey) {
  const Host host("v3");
  const DefaultRuntime d = containerd_chained_runtime(host.sources(), "gpu-run", std::nullopt);
  EXPECT_EQ(d.name, "nvidia");
  const ContainerdPlan plan = plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt);
  ASSERT_TRUE(plan.dropin);
  const toml::value doc = parsed(plan.edit.file.text);
  EXPECT_EQ(doc.at("version").as_integer(), 3);  // the main file's: no migration skipped
  const std::string plugin = "io.containerd.cri.v1.runtime";
  EXPECT_EQ(cri(doc, plugin).at("containerd").at("runtimes").as_table().size(), 1U);
  EXPECT_FALSE(cri(doc, plugin).at("containerd").contains("default_runtime_name"));
  const toml::value& ours = runtimes(doc, plugin).at("gpu-run");
  EXPECT_EQ(ours.at("options").at("BinaryName").as_string(), kEntry);
  EXPECT_TRUE(ours.at("options").at("SystemdCgroup").as_boolean());
  EXPECT_NOT_CONTAINS(plan.edit.file.text, "carries the CRI section");
  // Merged key by key: every file's handlers, NVIDIA's still the default.
  host.root.write("etc/containerd/conf.d/99-zz-gpu-run.toml", plan.edit.file.text);
  EXPECT_EQ(names_of(containerd_effective_runtimes(host.sources())),
            (std::vector<std::string>{"gpu-run=" + std::string(kEntry), "nvidia=" + std::string(kNvidia), "runc="}));
  EXPECT_EQ(containerd_chained_runtime(host.sources(), "gpu-run", std::nullopt).name, "nvidia");
  EXPECT_EQ(containerd_dropin_stale(host.sources(), "gpu-run"), "");
}

// containerd 1.x replaces a plugin's whole section with an import's; 2.x merges (upstream's
// TestMergingPluginsWithTwoCriRuntimeDropInConfigs: a runc-only file, then an nvidia-only one).
TEST(ContainerdDropin, AMinimalDropinReplacesTheSectionOn1xAndMergesOn2x) {
  for (const int version : {2, 3}) {
    const std::string plugin = version == 2 ? "io.containerd.grpc.v1.cri" : "io.containerd.cri.v1.runtime";
    const std::string table = "[plugins.\"" + plugin + "\".containerd";
    test::TempDir root;
    root.write("etc/containerd/config.toml", "version = " + std::to_string(version) +
                                                 "\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n" + table +
                                                 ".runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n");
    root.write("etc/containerd/conf.d/99-nvidia.toml",
               table + "]\ndefault_runtime_name = \"nvidia\"\n" + table +
                   ".runtimes.nvidia]\nruntime_type = \"io.containerd.runc.v2\"\n" + table +
                   ".runtimes.nvidia.options]\nBinaryName = \"" + kNvidia + "\"\n");
    const ContainerdSources s = read_containerd_sources(root / "etc/containerd/config.toml", "gpu-run", root.path());
    EXPECT_EQ(containerd_chained_runtime(s, "gpu-run", std::nullopt).binary, kNvidia) << version;
    const std::vector<std::string> want = version == 2
                                              ? std::vector<std::string>{"nvidia=" + std::string(kNvidia)}
                                              : std::vector<std::string>{"nvidia=" + std::string(kNvidia), "runc="};
    EXPECT_EQ(names_of(containerd_effective_runtimes(s)), want) << version;
  }
}

TEST(ContainerdDropin, ImportsAreBreadthFirstRelativeToTheirFileAndReadOnce) {
  test::TempDir root;
  root.write("c/config.toml", "version = 2\nimports = [\"conf.d/*.toml\", \"conf.d/10-a.toml\"]\n");
  root.write("c/conf.d/10-a.toml", "imports = [\"../nested/n.toml\"]\n");
  root.write("c/conf.d/20-b.toml", "");
  root.write("c/conf.d/notes.txt", "not toml");
  root.write("c/nested/n.toml", "");
  const ContainerdSources s = read_containerd_sources(root / "c/config.toml", "gpu-run");
  EXPECT_EQ(source_names(s), (std::vector<std::string>{"config.toml", "10-a.toml", "20-b.toml",
                                                       "99-zz-gpu-run.toml (ours, new)", "n.toml"}));
  // A missing explicit import: containerd does not start.
  root.write("d/config.toml", "version = 2\nimports = [\"/nowhere/x.toml\"]\n");
  const Error e = expect_error([&] { read_containerd_sources(root / "d/config.toml", "gpu-run", root.path()); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "imports /nowhere/x.toml, which does not exist (" + (root / "nowhere/x.toml").string());
  // A malformed import is named with its line.
  root.write("e/config.toml", "version = 2\nimports = [\"/etc/e/*.toml\"]\n");
  root.write("etc/e/50-bad.toml", "version = 2\n[plugins\n");
  EXPECT_CONTAINS(expect_error([&] { read_containerd_sources(root / "e/config.toml", "gpu-run", root.path()); }).what(),
                  (root / "etc/e/50-bad.toml").string() + ":2");
}

TEST(ContainerdDropin, AFileReadAfterGpuRunsThatReplacesTheSectionIsRefused) {
  const Host host("v2");
  host.root.write("etc/containerd/conf.d/zz-late.toml", nvidia_fixture("v2", "99-nvidia.toml"));
  const Error e = expect_error([&] { plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt); });
  EXPECT_CONTAINS(e.what(), host.conf_d("zz-late.toml").string() + " is read after gpu-run's drop-in");
  EXPECT_CONTAINS(e.what(), "rename it to sort before 99-zz-gpu-run.toml");
}

TEST(ContainerdDropin, WithoutADirectoryImportConfigTomlIsEditedUnlessAnImportReplacesItsSection) {
  test::TempDir root;
  // An explicit import with the CRI section: on 1.x, config.toml's handler would be lost.
  std::string config = nvidia_fixture("v2", "config.toml");
  const std::string glob = "/etc/containerd/conf.d/*.toml";
  config.replace(config.find(glob), glob.size(), "/etc/containerd/nvidia.toml");
  root.write("etc/containerd/config.toml", config);
  root.write("etc/containerd/nvidia.toml", nvidia_fixture("v2", "99-nvidia.toml"));
  const auto sources = [&] {
    return read_containerd_sources(root / "etc/containerd/config.toml", "gpu-run", root.path());
  };
  const Error e = expect_error([&] { plan_containerd(sources(), kEntry, "gpu-run", std::nullopt); });
  EXPECT_CONTAINS(e.what(), "its import " + (root / "etc/containerd/nvidia.toml").string() +
                                " replaces the whole io.containerd.grpc.v1.cri section");
  // An import that leaves the CRI section alone: config.toml gets the handler.
  root.write("etc/containerd/nvidia.toml", "version = 2\n[debug]\nlevel = \"debug\"\n");
  const ContainerdPlan plan = plan_containerd(sources(), kEntry, "gpu-run", std::nullopt);
  EXPECT_FALSE(plan.dropin);
  EXPECT_EQ(plan.path, (root / "etc/containerd/config.toml").string());
  EXPECT_EQ(runtimes(parsed(plan.edit.file.text)).at("gpu-run").at("options").at("BinaryName").as_string(), kEntry);
}

// GPU Operator 25.10 with CDI: handlers nvidia*, the default stays runc.
std::string cdi_operator_config(bool nvidia_handler) {
  std::string text =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"runc\"\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n";
  if (nvidia_handler)
    text +=
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\nruntime_type = "
        "\"io.containerd.runc.v2\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
        "BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n";
  return text;
}

TEST(ContainerdDropin, ChainingRuncNextToNvidiasHandlerWarnsAndChainNamesTheHandler) {
  const ContainerdSources s = single_containerd_source(cdi_operator_config(true), "config.toml");
  const ContainerdPlan plan = plan_containerd(s, "/usr/bin/gpu-run-runtime", "gpu-run", std::nullopt);
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_CONTAINS(plan.warnings[0],
                  "chains runc (containerd's runc) while the handler \"nvidia\" "
                  "(/usr/local/nvidia/toolkit/nvidia-container-runtime) runs NVIDIA's runtime");
  EXPECT_CONTAINS(plan.warnings[0], "--chain NAME");
  for (const std::string& n : plan.edit.file.notes) EXPECT_NOT_CONTAINS(n, "CDI devices");
  EXPECT_EQ(bypassed_gpu_handlers(containerd_runtimes(cdi_operator_config(true), "c"), ""),
            "\"nvidia\" (/usr/local/nvidia/toolkit/nvidia-container-runtime)");

  const DefaultRuntime d = containerd_chained_runtime(s, "gpu-run", std::string("nvidia"));
  EXPECT_EQ(d.name, "nvidia");
  EXPECT_EQ(d.binary, "/usr/local/nvidia/toolkit/nvidia-container-runtime");
  EXPECT_CONTAINS(d.where, "--chain");
  const ContainerdPlan chained = plan_containerd(s, kEntry, "gpu-run", std::string("nvidia"));
  EXPECT_TRUE(chained.warnings.empty());
  // The default stays runc; the handler has the chained handler's settings.
  const toml::value doc = parsed(chained.edit.file.text);
  EXPECT_EQ(cri(doc).at("containerd").at("default_runtime_name").as_string(), "runc");
  EXPECT_EQ(runtimes(doc).at("gpu-run").at("options").at("BinaryName").as_string(), kEntry);

  EXPECT_CONTAINS(
      expect_error([&] { containerd_chained_runtime(s, "gpu-run", std::string("kata")); }).what(),
      "--chain kata: config.toml has no [" + std::string(kV2Runtimes) + ".kata] (its handlers: runc, nvidia)");
  EXPECT_CONTAINS(expect_error([&] { containerd_chained_runtime(s, "gpu-run", std::string("gpu-run")); }).what(),
                  "that is gpu-run's own handler");
}

TEST(ContainerdDropin, OnACdiNodeWithoutNvidiasHandlerTheChainIsRuncAndConfigureSaysWhy) {
  const ContainerdPlan plan = plan_containerd(single_containerd_source(cdi_operator_config(false), "config.toml"),
                                              "/usr/bin/gpu-run-runtime", "gpu-run", std::nullopt);
  EXPECT_TRUE(plan.warnings.empty());
  std::string notes;
  for (const std::string& n : plan.edit.file.notes) notes += n + "\n";
  EXPECT_CONTAINS(notes,
                  "the chain is runc: containerd has CDI on (enable_cdi = true) and no handler runs NVIDIA's "
                  "runtime, so GPUs reach pods as CDI devices");
  // containerd 2.x has CDI on by default.
  const ContainerdPlan v3 = plan_containerd(single_containerd_source("version = 3\n", "config.toml"),
                                            "/usr/bin/gpu-run-runtime", "gpu-run", std::nullopt);
  notes.clear();
  for (const std::string& n : v3.edit.file.notes) notes += n + "\n";
  EXPECT_CONTAINS(notes, "CDI on (containerd 2.x's default)");
  // CDI off, no GPU handler: plain runc, nothing to explain.
  const ContainerdPlan plain = plan_containerd(single_containerd_source(node_config(), "config.toml"),
                                               "/usr/bin/gpu-run-runtime", "gpu-run", std::nullopt);
  for (const std::string& n : plain.edit.file.notes) EXPECT_NOT_CONTAINS(n, "CDI");
}

TEST(ContainerdDropin, UndoRemovesOnlyADropinGpuRunWrote) {
  const Host host("v2");
  const ContainerdPlan plan = plan_containerd(host.sources(), kEntry, "gpu-run", std::nullopt);
  const std::string path = plan.path;
  const UndoEdit undo = undo_containerd_dropin(plan.edit.file.text, path, "gpu-run");
  EXPECT_EQ(undo.kind, UndoEdit::kRemove);
  EXPECT_EQ(undo.entry_binary, kEntry);
  EXPECT_EQ(undo_containerd_dropin(std::nullopt, path, "gpu-run").kind, UndoEdit::kNothing);
  const Error e = expect_error([&] { undo_containerd_dropin("version = 2\n", path, "gpu-run"); });
  EXPECT_CONTAINS(e.what(), path + ": not a drop-in gpu-run-ctl configure wrote");
}

}  // namespace
}  // namespace gpurun
