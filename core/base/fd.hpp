#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "base/or_why.hpp"
#include "base/unique_handle.hpp"

namespace gpurun {

// close(2), for UniqueFd.
void close_fd(int fd);

// A move-only owner of a file descriptor; closes it on destruction.
using UniqueFd = UniqueHandle<int, -1, close_fd>;

// Reads `fd` to EOF, failing (Error naming `what`, with the read's errno) past `max_bytes`.
// Retries EINTR.
std::string read_bounded(int fd, std::size_t max_bytes, const std::string& what);

// The same, for a probe to which a file that cannot be read is an answer: the text, or why not
// (the read's error in words, or past `max_bytes`), naming `what`.
OrWhy<std::string> read_bounded_or_why(int fd, std::size_t max_bytes, const std::string& what);

// Writes all of `data` to `fd`, retrying short writes and EINTR.
void write_all(int fd, const std::string& data, const std::string& what);

// Atomically replaces `path` with `data`: a temp file in the same directory, rename. Keeps
// `mode`, and gives the file to `owner` before the rename when given. kDurable also fsyncs the
// file and the directory, so that the new content survives a crash; kVolatile is for files
// whose life is shorter than the machine's uptime.
enum class Durability { kDurable, kVolatile };
struct FileOwner {
  uid_t uid;
  gid_t gid;
};
void write_file_atomic(const std::string& path, const std::string& data, unsigned mode = 0644,
                       Durability durability = Durability::kDurable, std::optional<FileOwner> owner = std::nullopt);

// How open_dir_in_root resolves its path. Both stay inside the root's tree (RESOLVE_IN_ROOT:
// the image controls the path) and never follow /proc magic links.
enum class Resolve {
  kNoSymlinks,      // refuse every symlink (ELOOP); an O_PATH fd, for fstat*, fchdir and mount
  kSymlinksInRoot,  // follow symlinks as if `rootfd` were /; a readable fd, to list the directory
};

// Opens the directory `path` below `rootfd` (openat2, tried again when a host rename or mount
// raced a ".." of the walk: EAGAIN; before Linux 5.6, one openat with O_NOFOLLOW). Returns the
// fd, or -1 with errno set.
int open_dir_in_root(int rootfd, const char* path, Resolve resolve);

}  // namespace gpurun
