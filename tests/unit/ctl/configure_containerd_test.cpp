#include "ctl/configure/configure_containerd.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpurun
