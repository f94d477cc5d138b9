// TaskWatcher over a directory laid out as containerd's task directory (namespaces, task
// directories, init.pid written by rename as runc does), and task_container over a spec as
// containerd writes a pod's. The real containerd: tests/integration/cri_guard_test.sh.
#include "guard/task_watch.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/process.hpp"
#include "decision/contract.hpp"
#include "decision/decision_record.hpp"
#include "guard/engine_layout.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

using std::chrono::milliseconds;

// Events until `n` have come (or two seconds passed).
std::vector<TaskEvent> events(TaskWatcher& w, std::size_t n) {
  std::vector<TaskEvent> all;
  for (int i = 0; i < 40 && all.size() < n; ++i)
    for (TaskEvent& e : w.wait(milliseconds(50))) all.push_back(e);
  return all;
}

// runc's way: the pid to a temporary name, renamed to init.pid.
void write_pid(const test::TempDir& d, const std::string& task, int pid) {
  const fs::path tmp = d.write(task + "/.init.pid", std::to_string(pid));
  fs::rename(tmp, tmp.parent_path() / "init.pid");
}

TEST(TaskWatcher, ReportsRunningTasksThenNewOnesThenGoneOnes) {
  test::TempDir d;
  write_pid(d, "k8s.io/aaa", 100);
  fs::create_directories(d.path() / "k8s.io/nopid");  // created, no init process yet
  TaskWatcher w(d.path());
  std::vector<TaskEvent> first = events(w, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].started);
  EXPECT_EQ(first[0].ns, "k8s.io");
  EXPECT_EQ(first[0].id, "aaa");

  write_pid(d, "k8s.io/nopid", 101);  // its pid arrives
  write_pid(d, "moby/bbb", 102);      // a new namespace and task
  std::vector<TaskEvent> more = events(w, 2);
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[0].id, "nopid");
  EXPECT_EQ(more[1].ns, "moby");
  EXPECT_EQ(more[1].id, "bbb");

  // containerd renames a task's directory to ".<id>" before removing it: gone, not a new task.
  fs::rename(d.path() / "k8s.io/aaa", d.path() / "k8s.io/.aaa");
  fs::remove_all(d.path() / "k8s.io/.aaa");
  std::vector<TaskEvent> gone = events(w, 1);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_FALSE(gone[0].started);
  EXPECT_EQ(gone[0].id, "aaa");
  EXPECT_TRUE(w.wait(milliseconds(20)).empty());
}

TEST(TaskWatcher, NamesThatAreNotContainerdIdentifiersAreLeftAlone) {
  test::TempDir d;
  write_pid(d, "k8s.io/ok-1.x", 1);
  write_pid(d, "k8s.io/bad name", 2);
  write_pid(d, "k8s.io/_under", 3);
  TaskWatcher w(d.path());
  std::vector<TaskEvent> all = events(w, 1);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, "ok-1.x");
  EXPECT_TRUE(w.wait(milliseconds(50)).empty());
}

TEST(TaskWatcher, AMissingRootIsAnErrorThatSaysWhatToDo) {
  test::TempDir d;
  try {
    TaskWatcher w(d.path() / "none");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--containerd-state"), std::string::npos) << e.what();
  }
}

// podman's way (engine_layout.hpp, podman_layout_at): <runroot>/<driver>-containers/<id>/userdata/
// pidfile, written by rename, kept after the container stops. Real processes stand for the
// containers' init processes, so that their exit is seen.
const std::string kIdA(64, 'a');
const std::string kIdB(64, 'b');

// Under a run root of storage driver "t": <d>/t-containers/<id>/userdata/pidfile.
void write_podman_pid(const test::TempDir& d, const std::string& id, int pid) {
  const fs::path tmp = d.write("t-containers/" + id + "/userdata/.pidfile", std::to_string(pid));
  fs::rename(tmp, tmp.parent_path() / "pidfile");
}

TaskLayout podman_test_layout(const test::TempDir& d) { return podman_layout_at(d.path(), "t"); }

TEST(TaskWatcher, PodmansContainersStartWithTheirPidAndGoWhenItExits) {
  test::TempDir d;
  Child running = spawn({"sleep", "30"});
  write_podman_pid(d, kIdA, running.pid());
  fs::create_directories(d / ("t-containers/" + kIdB));  // made, its userdata not yet
  TaskWatcher w(podman_test_layout(d));
  std::vector<TaskEvent> first = events(w, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].started);
  EXPECT_EQ(first[0].ns, "");
  EXPECT_EQ(first[0].id, kIdA);
  EXPECT_EQ(first[0].pid, running.pid());

  Child b = spawn({"sleep", "30"});
  write_podman_pid(d, kIdB, b.pid());  // userdata made now, then the pid file in it
  std::vector<TaskEvent> more = events(w, 1);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].id, kIdB);
  EXPECT_EQ(more[0].pid, b.pid());

  // Its process exits, its directory stays (a stopped podman container): gone all the same.
  b = Child();
  std::vector<TaskEvent> gone = events(w, 1);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_FALSE(gone[0].started);
  EXPECT_EQ(gone[0].id, kIdB);

  // Started again: a new pid file.
  Child again = spawn({"sleep", "30"});
  write_podman_pid(d, kIdB, again.pid());
  std::vector<TaskEvent> restarted = events(w, 1);
  ASSERT_EQ(restarted.size(), 1u);
  EXPECT_TRUE(restarted[0].started);
  EXPECT_EQ(restarted[0].pid, again.pid());

  // Removed while running (podman rm -f): gone.
  fs::remove_all(d / ("t-containers/" + kIdA));
  std::vector<TaskEvent> removed = events(w, 1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_FALSE(removed[0].started);
  EXPECT_EQ(removed[0].id, kIdA);
  EXPECT_TRUE(w.wait(milliseconds(20)).empty());
}

TEST(TaskWatcher, AStoppedPodmanContainersPidFileIsNotAStart) {
  test::TempDir d;
  Child exited = spawn({"true"});
  const int pid = exited.pid();
  exited.wait();
  write_podman_pid(d, kIdA, pid);
  TaskWatcher w(podman_test_layout(d));
  EXPECT_TRUE(w.wait(milliseconds(100)).empty());
}

TEST(TaskWatcher, AContainersNewPidIsARestartWithoutAnExitSeen) {
  test::TempDir d;
  write_pid(d, "moby/ccc", 100);
  TaskWatcher w(d.path());
  ASSERT_EQ(events(w, 1).size(), 1u);
  write_pid(d, "moby/ccc", 200);
  std::vector<TaskEvent> again = events(w, 2);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_FALSE(again[0].started);
  EXPECT_TRUE(again[1].started);
  EXPECT_EQ(again[1].pid, 200);
}

// What an engine's directories may hold that is not a container: left alone, never followed.
TEST(TaskWatcher, HostileNamesLinksAndPidFilesAreLeftAlone) {
  test::TempDir d;
  Child c = spawn({"sleep", "30"});
  const std::string pid = std::to_string(c.pid());
  const std::string root = "t-containers/";
  d.write("elsewhere/userdata/pidfile", pid);
  d.write(root + std::string(63, 'c') + "/userdata/pidfile", pid);                   // not an id: too short
  d.write(root + std::string(64, 'C') + "/userdata/pidfile", pid);                   // not an id: upper case
  fs::create_directory_symlink(d / "elsewhere", d / (root + std::string(64, 'd')));  // a linked container
  fs::create_directories(d / (root + std::string(64, 'e')));
  fs::create_directory_symlink(d / "elsewhere/userdata", d / (root + std::string(64, 'e') + "/userdata"));
  d.write(root + std::string(64, 'f') + "/userdata/pidfile", std::string(100, '1'));  // too long
  d.write(root + std::string(64, '0') + "/userdata/pidfile", "-1");
  fs::create_directories(d / (root + std::string(64, '1') + "/userdata"));
  fs::create_symlink(d / "elsewhere/userdata/pidfile", d / (root + std::string(64, '1') + "/userdata/pidfile"));
  write_podman_pid(d, kIdA, c.pid());
  TaskWatcher w(podman_test_layout(d));
  std::vector<TaskEvent> all = events(w, 1);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, kIdA);
  EXPECT_TRUE(w.wait(milliseconds(50)).empty());
}

constexpr const char* kPodSpec = R"({"ociVersion": "1.1.0", "process": {"env": ["PATH=/bin", "GPU_RUN_SHM_SIZE=64m"]},
  "root": {"path": "rootfs"},
  "linux": {"resources": {"memory": {"limit": 1073741824}},
            "namespaces": [{"type": "ipc", "path": "/proc/5/ns/ipc"}, {"type": "mount"}]},
  "mounts": [{"destination": "/dev/shm", "type": "bind",
              "source": "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm", "options": ["rbind"]}],
  "annotations": {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.container-name": "trainer",
                  "io.kubernetes.cri.sandbox-namespace": "ml", "io.kubernetes.cri.sandbox-name": "ddp-0",
                  "io.kubernetes.cri.sandbox-uid": "u-1", "gpu-run.profile": "imagenet", "other": "x"}})";

TEST(TaskContainer, APodsContainerWithItsCriNamesAndGpuRunsRequest) {
  test::TempDir d;
  d.write("k8s.io/c1/init.pid", "4242\n");
  d.write("k8s.io/c1/config.json", kPodSpec);
  auto c = task_container(d.path(), TaskEvent{true, "k8s.io", "c1"});
  ASSERT_TRUE(c) << c.why;
  EXPECT_EQ(c->pid, 4242);
  EXPECT_EQ(c->name, "trainer");
  EXPECT_EQ(c->engine, "containerd");
  EXPECT_EQ(c->ipc.kind, IpcKind::kShareable);  // the pod's own shm, bound from its sandbox
  EXPECT_EQ(c->ipc.text, "");                   // containerd says no words of its own
  EXPECT_EQ(c->memory_limit, std::optional<std::uint64_t>(1u << 30));
  EXPECT_EQ(c->annotations.at(kCriSandboxNamespace), "ml");
  EXPECT_EQ(c->annotations.at(kCriSandboxName), "ddp-0");
  EXPECT_EQ(c->annotations.at(kLabelProfile), "imagenet");
  EXPECT_EQ(c->annotations.count("other"), 0u);
  EXPECT_TRUE(c->labels.empty());  // a task has no engine labels: nothing is forged as one
  // gpu-run sized it: its annotation's gpu-run.profile, read as the old keys are.
  EXPECT_EQ(read_recorded(*c, {}).legacy.profile, "imagenet");
  EXPECT_TRUE(read_recorded(*c, {}).sized());
}

// Docker's and podman's bundles: the spec beside the pid file, whose gpu-run.* annotations carry
// the runtime's record.
TEST(TaskContainer, TheBundleOfATaskIsWhereItsPidFileIs) {
  TaskLayout containerd("/s");
  EXPECT_EQ(task_bundle(containerd, TaskEvent{true, "moby", "c1"}), fs::path("/s/moby/c1"));
  TaskLayout podman("/r/overlay-containers");
  podman.namespaced = false;
  podman.pid_path = {"userdata", "pidfile"};
  EXPECT_EQ(task_bundle(podman, TaskEvent{true, "", "c2"}), fs::path("/r/overlay-containers/c2/userdata"));
  test::TempDir d;
  d.write("c/config.json", kPodSpec);
  const auto a = bundle_annotations(d.path() / "c");
  EXPECT_EQ(a.at(kLabelProfile), "imagenet");
  EXPECT_EQ(a.count("other"), 0u);
  EXPECT_TRUE(bundle_annotations(d.path() / "none").empty());
}

// The webhook's route: /dev/shm is a kubelet emptyDir, the pod's own though no engine's shm.
TEST(TaskContainer, AKubeletEmptyDirAtDevShmIsThePodsOwn) {
  test::TempDir d;
  std::string spec = kPodSpec;
  const std::string sandbox = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm";
  spec.replace(spec.find(sandbox), sandbox.size(), "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~empty-dir/dshm");
  d.write("k8s.io/e1/init.pid", "9");
  d.write("k8s.io/e1/config.json", spec);
  auto c = task_container(d.path(), TaskEvent{true, "k8s.io", "e1"});
  ASSERT_TRUE(c) << c.why;
  EXPECT_EQ(c->ipc.kind, IpcKind::kShareable);
  EXPECT_TRUE(c->shm_empty_dir);
  // A hostPath at /dev/shm stays the host's.
  spec.replace(spec.find("/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~empty-dir/dshm"), 62, "/dev/shm");
  d.write("k8s.io/e2/init.pid", "10");
  d.write("k8s.io/e2/config.json", spec);
  c = task_container(d.path(), TaskEvent{true, "k8s.io", "e2"});
  ASSERT_TRUE(c) << c.why;
  EXPECT_EQ(c->ipc.kind, IpcKind::kHost);
  EXPECT_FALSE(c->shm_empty_dir);
}

TEST(TaskContainer, TheSandboxAndTheUnreadableAreNotContainersToGuard) {
  test::TempDir d;
  std::string spec = kPodSpec;
  spec.replace(spec.find("\"container\","), 12, "\"sandbox\",");
  d.write("k8s.io/s1/init.pid", "7");
  d.write("k8s.io/s1/config.json", spec);
  const auto s1 = task_container(d.path(), TaskEvent{true, "k8s.io", "s1"});
  EXPECT_FALSE(s1);
  EXPECT_EQ(s1.why, kSandboxContainer);
  d.write("k8s.io/s2/init.pid", "not a pid");
  d.write("k8s.io/s2/config.json", kPodSpec);
  const auto s2 = task_container(d.path(), TaskEvent{true, "k8s.io", "s2"});
  EXPECT_FALSE(s2);
  EXPECT_NE(s2.why.find("init.pid"), std::string::npos) << s2.why;
  d.write("k8s.io/s3/init.pid", "8");
  d.write("k8s.io/s3/config.json", "{");
  const auto s3 = task_container(d.path(), TaskEvent{true, "k8s.io", "s3"});
  EXPECT_FALSE(s3);
  EXPECT_FALSE(s3.why.empty());
}

}  // namespace
}  // namespace gpurun
