// Where the guard finds Docker's and podman's container directories: dockerd's and containerd's
// flags and configs read from a /proc laid out as Linux shows it (net/unix, <pid>/comm, cmdline, fd
// links to socket:[inode]). The real dockerd (its own containerd, or a private one by
// --containerd) and podman: tests/integration/ctl_guard_test.sh.
#include "guard/engine_layout.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_files.hpp"

namespace gpurun {
namespace {

using test::TempDir;

TEST(FlagValue, GoFlagsWithOneOrTwoDashesAndTheLastOneWins) {
  const std::vector<std::string> argv = {
      "dockerd", "--exec-root", "/a", "-H", "unix:///s", "--exec-root=/b", "--containerd-namespace=ns", "--debug"};
  EXPECT_EQ(flag_value(argv, "exec-root"), std::optional<std::string>("/b"));
  EXPECT_EQ(flag_value(argv, "containerd"), std::nullopt);  // a prefix of another flag is not it
  EXPECT_EQ(flag_value(argv, "containerd-namespace"), std::optional<std::string>("ns"));
  EXPECT_EQ(flag_value(argv, "H"), std::optional<std::string>("unix:///s"));
  EXPECT_EQ(flag_value({"containerd", "-c", "/etc/c.toml"}, "c"), std::optional<std::string>("/etc/c.toml"));
  EXPECT_EQ(flag_value({"containerd", "--config"}, "config"), std::nullopt);  // no value
  EXPECT_EQ(flag_value({"containerd", "--", "--state", "/x"}, "state"), std::nullopt);
}

constexpr const char* kUnixHeader = "Num       RefCount Protocol Flags    Type St Inode Path\n";

TEST(UnixListeners, OnlyListeningSocketsAtThatPath) {
  const std::string table = std::string(kUnixHeader) +
                            "0000000000000000: 00000002 00000000 00010000 0001 01 111 /run/docker.sock\n"
                            "0000000000000000: 00000003 00000000 00000000 0001 03 112 /run/docker.sock\n"
                            "0000000000000000: 00000002 00000000 00010000 0001 01 113 /run/docker.sock.old\n"
                            "0000000000000000: 00000002 00000000 00010000 0001 01 114\n"
                            "0000000000000000: 00000002 00000000 00010000 0001 01 115 /tmp/a b/docker.sock\n"
                            "garbage\n";
  EXPECT_EQ(unix_listeners(table, "/run/docker.sock"), std::vector<unsigned long>{111});
  EXPECT_EQ(unix_listeners(table, "/tmp/a b/docker.sock"), std::vector<unsigned long>{115});
  EXPECT_TRUE(unix_listeners(table, "/run/none.sock").empty());
}

// A /proc with the given processes, each (pid, comm, argv, socket inodes it holds), and the
// listening sockets (inode, path).
struct FakeProcess {
  int pid;
  std::string comm;
  std::vector<std::string> argv;
  std::vector<unsigned long> sockets;
};
fs::path fake_proc(const TempDir& d, const std::vector<FakeProcess>& processes,
                   const std::vector<std::pair<unsigned long, std::string>>& listening) {
  std::string table = kUnixHeader;
  for (const auto& [inode, path] : listening)
    table += "0000000000000000: 00000002 00000000 00010000 0001 01 " + std::to_string(inode) + " " + path + "\n";
  d.write("proc/net/unix", table);
  for (const FakeProcess& p : processes) {
    const std::string dir = "proc/" + std::to_string(p.pid);
    d.write(dir + "/comm", p.comm + "\n");
    std::string cmdline;
    for (const std::string& a : p.argv) cmdline += a + '\0';
    d.write(dir + "/cmdline", cmdline);
    fs::create_directories(d / (dir + "/fd"));
    int fd = 3;
    for (unsigned long inode : p.sockets)
      fs::create_symlink("socket:[" + std::to_string(inode) + "]", d / (dir + "/fd/" + std::to_string(fd++)));
  }
  return d / "proc";
}

TEST(DockerLayout, DockerdsOwnContainerdUnderItsExecRoot) {
  TempDir d;
  const std::string exec = (d / "exec").string();
  d.write("exec/containerd/containerd.toml", "version = 0\nstate = \"" + exec + "/containerd/daemon\"\n");
  fs::create_directories(d / "exec/containerd/daemon/io.containerd.runtime.v2.task");
  const std::string conf = (d / "daemon.json").string();
  d.write("daemon.json", "{}");
  const fs::path proc = fake_proc(
      d,
      {{10, "dockerd", {"dockerd", "--exec-root", exec, "-H", "unix:///d/docker.sock", "--config-file", conf}, {7, 8}},
       {11, "containerd", {"containerd", "--config", exec + "/containerd/containerd.toml"}, {9}},
       {12, "sh", {"sh"}, {}}},
      {{8, "/d/docker.sock"}, {9, exec + "/containerd/containerd.sock"}});
  const auto layout = docker_layout("unix:///d/docker.sock", proc);
  ASSERT_TRUE(layout) << layout.why;
  EXPECT_EQ(layout->root, d / "exec/containerd/daemon/io.containerd.runtime.v2.task");
  EXPECT_EQ(layout->namespaces, std::set<std::string>{"moby"});
  EXPECT_EQ(layout->engine, "docker");
  EXPECT_EQ(layout->pid_path, std::vector<std::string>{"init.pid"});
}

TEST(DockerLayout, AContainerdNamedInDaemonJsonWithItsStateFlag) {
  TempDir d;
  fs::create_directories(d / "state/io.containerd.runtime.v2.task");
  const std::string sock = (d / "ctd.sock").string();
  d.write("daemon.json", "{\"containerd\": \"" + sock + "\", \"containerd-namespace\": \"docker-ns\"}");
  const fs::path proc = fake_proc(
      d,
      {{20, "dockerd", {"dockerd", "--config-file", (d / "daemon.json").string()}, {1}},
       // Another containerd, serving something else, and a process that is not containerd at that socket.
       {21, "containerd", {"containerd", "--state", "/elsewhere"}, {2}},
       {22, "socat", {"socat"}, {3}},
       {23, "containerd", {"containerd", "--state=" + (d / "state").string(), "--config", "/nonexistent.toml"}, {3}}},
      {{1, "/var/run/docker.sock"}, {2, "/run/containerd/containerd.sock"}, {3, sock}});
  const auto layout = docker_layout("", proc);
  ASSERT_TRUE(layout) << layout.why;
  EXPECT_EQ(layout->root, d / "state/io.containerd.runtime.v2.task");
  EXPECT_EQ(layout->namespaces, std::set<std::string>{"docker-ns"});
}

TEST(DockerLayout, SaysWhyWhenItCannotBeFound) {
  TempDir d, d2, d3;
  const auto l1 = docker_layout("tcp://10.0.0.1:2376", fake_proc(d, {}, {}));
  EXPECT_FALSE(l1);
  EXPECT_NE(l1.why.find("not a unix socket"), std::string::npos) << l1.why;
  const auto l2 = docker_layout("unix:///d/docker.sock", d / "proc");
  EXPECT_FALSE(l2);
  EXPECT_NE(l2.why.find("no dockerd process serves /d/docker.sock"), std::string::npos) << l2.why;
  // dockerd, but its containerd is not running.
  const fs::path proc = fake_proc(d2, {{30, "dockerd", {"dockerd", "--containerd", "/c.sock"}, {4}}}, {{4, "/d.sock"}});
  const auto l3 = docker_layout("unix:///d.sock", proc);
  EXPECT_FALSE(l3);
  EXPECT_NE(l3.why.find("no containerd process serves dockerd (pid 30) at /c.sock"), std::string::npos) << l3.why;
  // Its containerd's config is not TOML.
  d3.write("bad.toml", "state = [");
  const fs::path proc3 = fake_proc(d3,
                                   {{30, "dockerd", {"dockerd", "--containerd", "/c.sock"}, {4}},
                                    {31, "containerd", {"containerd", "-c", (d3 / "bad.toml").string()}, {5}}},
                                   {{4, "/d.sock"}, {5, "/c.sock"}});
  const auto l4 = docker_layout("unix:///d.sock", proc3);
  EXPECT_FALSE(l4);
  EXPECT_NE(l4.why.find("cannot read containerd's config"), std::string::npos) << l4.why;
}

TEST(PodmanLayout, ThePidFileUnderTheRunRootsContainers) {
  const TaskLayout layout = podman_layout_at("/run/containers/storage", "overlay");
  EXPECT_EQ(layout.root, fs::path("/run/containers/storage/overlay-containers"));
  EXPECT_EQ(layout.engine, "podman");
  EXPECT_FALSE(layout.namespaced);
  EXPECT_EQ(layout.pid_path, (std::vector<std::string>{"userdata", "pidfile"}));
  EXPECT_TRUE(layout.gone_on_exit);
  EXPECT_TRUE(layout.is_id(std::string(64, 'a')));
  EXPECT_FALSE(layout.is_id("abc"));
}

}  // namespace
}  // namespace gpurun
