#pragma once

// The host as a node installer running in a container sees it: its root filesystem mounted at
// a directory (--host-root), its service manager reached through the host's PID 1.

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

// `host_path` (absolute, as the host names it) below `root`: root/etc/containerd/config.toml.
fs::path under_root(const fs::path& root, const fs::path& host_path);

// Runs `body` in a child process chrooted into `root`, so that every path it reads or writes,
// and every path it writes into a file (containerd's imports, a runtime's BinaryName), is the
// host's. The child's output is this process's. Throws Error naming `what` when the child fails
// (its own message is printed by the child), with the child's exit code.
void run_in_root(const fs::path& root, const std::string& what, const std::function<void()>& body);

// Restarts containerd: `command` run by /bin/sh in this process's namespaces when given, else
// `systemctl restart containerd` in the mount, UTS, IPC and network namespaces of the host's
// PID 1 (the pod has hostPID). Throws Error naming the command and its exit status.
void restart_containerd(const std::optional<std::string>& command);

// True when the gRPC server on the unix socket `socket` answers CRI's RuntimeService.Version
// with a response message; else false with the reason in `why`. Waits at most `timeout`.
//
// The call goes through nghttp2 (Debian's libnghttp2, linked from its archive): a client
// session with one unary request (an empty VersionRequest). A DATA frame on the stream is an
// answer; trailers alone, a reset or a GOAWAY are not (a containerd without the CRI plugin
// answers "unimplemented").
bool cri_answers(const fs::path& socket, std::chrono::milliseconds timeout, std::string& why);

// Waits until cri_answers(socket) or `timeout` passes; throws Error naming the socket, the
// timeout and the last reason.
void wait_for_cri(const fs::path& socket, std::chrono::seconds timeout);

}  // namespace gpurun
