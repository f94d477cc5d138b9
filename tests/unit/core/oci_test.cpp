#include "oci/oci.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/units.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

TEST(OciStateTest, ParsesState) {
  OciState s = parse_state(R"({"ociVersion":"1.0.2","id":"abc","status":"creating","pid":42,
    "bundle":"/run/b","annotations":{"gpu-run.profile":"imagenet"}})");
  EXPECT_EQ(s.id, "abc");
  EXPECT_EQ(s.pid, 42);
  EXPECT_EQ(s.bundle, "/run/b");
  EXPECT_EQ(s.annotations.at("gpu-run.profile"), "imagenet");
}

TEST(OciStateTest, RejectsBadState) {
  EXPECT_THROW(parse_state(R"({"id":"abc","pid":42,"bundle":)"), Error);           // truncated
  EXPECT_THROW(parse_state("[]"), Error);                                          // not an object
  EXPECT_THROW(parse_state(R"({"pid":42,"bundle":"/b"})"), Error);                 // no id
  EXPECT_THROW(parse_state(R"({"id":"a","pid":42,"bundle":"relative"})"), Error);  // relative bundle
  EXPECT_THROW(parse_state(R"({"id":"a","pid":-1,"bundle":"/b"})"), Error);
  EXPECT_THROW(parse_state(R"({"id":"a","pid":"12","bundle":"/b"})"), Error);
  EXPECT_THROW(parse_state(R"({"id":"a","pid":1,"bundle":"/b","annotations":{"k":1}})"), Error);
}

json docker_like_spec() {
  return json::parse(R"({
    "root": {"path": "rootfs"},
    "process": {"env": ["PATH=/bin", "GPU_RUN_PROFILE=cifar", "EMPTY=", "NOEQUALS"]},
    "annotations": {"gpu-run.gpus": "2"},
    "mounts": [
      {"destination": "/proc", "type": "proc", "source": "proc"},
      {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
       "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=67108864"]}
    ],
    "linux": {
      "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "mount"}],
      "resources": {"memory": {"limit": 2147483648}, "cpu": {"quota": 150000, "period": 100000, "cpus": "0-3"}},
      "devices": [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidia1"}, {"path": "/dev/nvidiactl"}]
    }})");
}

TEST(OciSpecTest, ExtractsFacts) {
  SpecFacts f = spec_facts(docker_like_spec(), "/run/bundle");
  EXPECT_EQ(f.rootfs, "/run/bundle/rootfs");
  EXPECT_EQ(f.env.at("GPU_RUN_PROFILE"), "cifar");
  EXPECT_EQ(f.env.at("EMPTY"), "");
  EXPECT_EQ(f.env.count("NOEQUALS"), 0u);
  EXPECT_EQ(f.annotations.at("gpu-run.gpus"), "2");
  EXPECT_EQ(f.memory_limit, 2 * kGiB);
  ASSERT_TRUE(f.cpu_quota);
  EXPECT_DOUBLE_EQ(*f.cpu_quota, 1.5);
  EXPECT_EQ(f.cpuset_cpus, 4u);
  EXPECT_EQ(f.gpu_devices, 2u);
  EXPECT_TRUE(f.has_ipc_namespace);
  EXPECT_FALSE(f.ipc_namespace_path);
  EXPECT_EQ(f.shm_type, SpecShmType::kTmpfs);
  EXPECT_EQ(f.shm_size, 64 * kMiB);
}

TEST(OciSpecTest, FactsOnlyParseKeepsWhatSpecFactsReads) {
  json whole = docker_like_spec();
  whole["hooks"] = {{"createRuntime", json::array({{{"path", "/bin/x"}}})}};
  whole["process"]["capabilities"] = {{"bounding", {"CAP_CHOWN"}}};
  whole["process"]["args"] = {"sh"};
  whole["linux"]["seccomp"] = {{"defaultAction", "SCMP_ACT_ERRNO"}, {"syscalls", json::array()}};
  whole["linux"]["maskedPaths"] = {"/proc/kcore"};
  whole["annotations"]["seccomp"] = "an annotation, not the linux.seccomp section";
  whole["linux"]["cgroupsPath"] = "kubepods-pod1.slice:cri-containerd:abc";
  test::TempDir dir;
  dir.write("config.json", whole.dump());

  json facts = load_spec(dir.path(), SpecParts::kFacts);
  EXPECT_FALSE(facts.contains("hooks"));
  EXPECT_FALSE(facts["process"].contains("capabilities"));
  EXPECT_EQ(facts["process"]["args"], whole["process"]["args"]);  // the command line's workers (command_line.hpp)
  EXPECT_FALSE(facts["linux"].contains("seccomp"));
  EXPECT_FALSE(facts["linux"].contains("maskedPaths"));
  EXPECT_EQ(facts["annotations"]["seccomp"], whole["annotations"]["seccomp"]);
  EXPECT_EQ(facts["mounts"], whole["mounts"]);
  EXPECT_EQ(facts["linux"]["resources"], whole["linux"]["resources"]);
  EXPECT_EQ(facts["linux"]["namespaces"], whole["linux"]["namespaces"]);
  EXPECT_EQ(facts["linux"]["devices"], whole["linux"]["devices"]);
  EXPECT_EQ(facts["process"]["env"], whole["process"]["env"]);
  EXPECT_EQ(load_spec(dir.path()), whole);

  SpecFacts a = spec_facts(facts, dir.path()), b = spec_facts(whole, dir.path());
  EXPECT_EQ(a.rootfs, b.rootfs);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.annotations, b.annotations);
  EXPECT_EQ(a.memory_limit, b.memory_limit);
  EXPECT_EQ(a.cpu_quota, b.cpu_quota);
  EXPECT_EQ(a.cpuset_cpus, b.cpuset_cpus);
  EXPECT_EQ(a.gpu_devices, b.gpu_devices);
  EXPECT_EQ(a.has_ipc_namespace, b.has_ipc_namespace);
  EXPECT_EQ(a.shm_size, b.shm_size);
  EXPECT_EQ(a.shm_type, b.shm_type);
  EXPECT_EQ(a.cgroups_path, std::optional<std::string>("kubepods-pod1.slice:cri-containerd:abc"));
  EXPECT_EQ(a.cgroups_path, b.cgroups_path);

  dir.write("config.json", R"({"linux": {"seccomp": {"syscalls": [}}})");
  EXPECT_THROW(load_spec(dir.path(), SpecParts::kFacts), Error);  // skipped parts must still be JSON
}

TEST(OciSpecTest, HostIpcAndBindShm) {
  json spec = json::parse(R"({"root": {"path": "/abs/root"},
    "mounts": [{"destination": "/dev/shm/", "type": "bind", "source": "/dev/shm", "options": ["rbind"]}],
    "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}})");
  SpecFacts f = spec_facts(spec, "/b");
  EXPECT_EQ(f.rootfs, "/abs/root");
  EXPECT_FALSE(f.has_ipc_namespace);
  EXPECT_EQ(f.shm_type, SpecShmType::kBind);
  EXPECT_EQ(f.shm_source, "/dev/shm");
  EXPECT_FALSE(f.shm_size);
}

TEST(OciSpecTest, ToleratesOddTypes) {
  json spec = json::parse(R"({"mounts": "x", "linux": {"resources": {"memory": {"limit": "big"}},
    "namespaces": [1, {"type": "ipc", "path": "/proc/1/ns/ipc"}]}, "process": {"env": [1, "A=b"]}})");
  SpecFacts f = spec_facts(spec, "/b");
  EXPECT_FALSE(f.memory_limit);
  EXPECT_TRUE(f.has_ipc_namespace);
  EXPECT_TRUE(f.ipc_namespace_path);
  EXPECT_EQ(f.env.at("A"), "b");
  EXPECT_THROW(spec_facts(json::parse(R"({"annotations": {"a": 1}})"), "/b"), Error);
}

TEST(OciSpecTest, SetsTmpfsSizeReplacingTheOldOne) {
  json spec = docker_like_spec();
  int idx = find_shm_mount(spec);
  ASSERT_EQ(idx, 1);
  set_tmpfs_size(spec["mounts"][1], 3 * kGiB);
  const json& opts = spec["mounts"][1]["options"];
  int sizes = 0;
  for (const auto& o : opts)
    if (o.get<std::string>().rfind("size=", 0) == 0) ++sizes;
  EXPECT_EQ(sizes, 1);
  EXPECT_EQ(opts.back(), "size=3221225472");
  EXPECT_EQ(opts[0], "nosuid");
}

TEST(OciSpecTest, AddsHookOnce) {
  json spec = docker_like_spec();
  EXPECT_TRUE(add_hook(spec, "createRuntime", "/usr/bin/gpu-run-hook", {"gpu-run-hook", "createRuntime"}));
  EXPECT_FALSE(add_hook(spec, "createRuntime", "/usr/bin/gpu-run-hook", {"gpu-run-hook", "createRuntime"}));
  EXPECT_FALSE(add_hook(spec, "prestart", "/usr/bin/gpu-run-hook", {"gpu-run-hook"}));
  ASSERT_EQ(spec["hooks"]["createRuntime"].size(), 1u);
  EXPECT_EQ(spec["hooks"]["createRuntime"][0]["args"][1], "createRuntime");
  EXPECT_EQ(spec["mounts"].size(), 2u);  // everything else kept
}

TEST(OciSpecTest, NoShmMount) {
  EXPECT_EQ(find_shm_mount(json::parse(R"({"mounts": [{"destination": "/proc"}]})")), -1);
  EXPECT_EQ(find_shm_mount(json::object()), -1);
}

}  // namespace
}  // namespace gpurun

namespace gpurun {
namespace {

// Found by fuzz_state: a non-string status and an out-of-range number escaped as
// nlohmann exceptions instead of gpurun::Error.
TEST(OciStateTest, FuzzRegressions) {
  EXPECT_THROW(parse_state(R"({"id":"x","bundle":"/b","status":1})"), Error);
  EXPECT_THROW(parse_state(R"({"id":"x","bundle":"/b","pid":1e999})"), Error);
}

TEST(OciSpecTest, EngineShmSources) {
  EXPECT_TRUE(is_engine_shm_source("/run/containerd/io.containerd.grpc.v1.cri/sandboxes/0123abc/shm"));
  EXPECT_TRUE(is_engine_shm_source("/var/lib/docker/containers/0123abc/mounts/shm"));
  EXPECT_TRUE(is_engine_shm_source("/var/lib/containers/storage/overlay-containers/0123abc/userdata/shm/"));
  EXPECT_FALSE(is_engine_shm_source("/dev/shm"));
  EXPECT_FALSE(is_engine_shm_source("/run"));
  EXPECT_FALSE(is_engine_shm_source("/srv/shm"));
  EXPECT_FALSE(is_engine_shm_source("userdata/shm"));  // relative
  EXPECT_FALSE(is_engine_shm_source("/var/lib/docker/containers/x/mounts/shm/../../../../../../run"));
}

TEST(OciSpecTest, UsesHostShm) {
  SpecFacts s;
  EXPECT_TRUE(uses_host_shm(s));  // no ipc namespace
  s.has_ipc_namespace = true;
  EXPECT_FALSE(uses_host_shm(s));  // no /dev/shm mount, or the engine's tmpfs
  s.shm_type = SpecShmType::kBind;
  s.shm_source = "/dev/shm";
  EXPECT_TRUE(uses_host_shm(s));
  s.shm_source = "/var/lib/docker/containers/abc/mounts/shm";
  EXPECT_FALSE(uses_host_shm(s));
}

}  // namespace
}  // namespace gpurun
