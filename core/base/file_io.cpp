#include "base/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/error.hpp"
#include "base/fd.hpp"

namespace gpurun {

std::string read_small_file(const fs::path& path, std::size_t max_bytes, const std::string& what, struct stat* opened) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    // A path that names nothing readable is the caller's mistake; anything else (EIO, EMFILE...)
    // is the system failing.
    const bool wrong_path = err == ENOENT || err == ENOTDIR || err == EACCES || err == ELOOP || err == ENAMETOOLONG;
    throw Error(what + " " + path.string() + ": cannot open: " + std::strerror(err) +
                    (err == EACCES ? " (check its permissions)" : ""),
                err, wrong_path ? kExitUsage : kExitFailure);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw system_error(what + " " + path.string() + ": stat", errno);
  if (S_ISDIR(st.st_mode))
    throw usage_error(what + " " + path.string() + ": is a directory, expected a JSON file", EISDIR);
  if (!S_ISREG(st.st_mode)) throw usage_error(what + " " + path.string() + ": is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw usage_error(what + " " + path.string() + ": larger than " + std::to_string(max_bytes) + " bytes");
  if (opened) *opened = st;
  return read_bounded(fd.get(), max_bytes, what + " " + path.string());
}

std::optional<std::string> read_below(const fs::path& root, const fs::path& relative, std::size_t max_bytes) {
  if (relative.empty() || relative.has_root_path()) return std::nullopt;
  UniqueFd at(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  const fs::path file = relative.filename();
  for (const fs::path& part : relative.parent_path()) {
    if (!at || part == "." || part == "..") return std::nullopt;
    at = UniqueFd(::openat(at.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!at || file.empty() || file == "." || file == "..") return std::nullopt;
  UniqueFd fd(::openat(at.get(), file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  OrWhy<std::string> text = read_bounded_or_why(fd.get(), max_bytes, (root / relative).string());
  if (!text) return std::nullopt;
  return std::move(*text);
}

}  // namespace gpurun
