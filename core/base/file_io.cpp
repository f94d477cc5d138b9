#include "file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "error.hpp"
#include "fd.hpp"

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
  if (S_ISDIR(st.st_mode)) throw usage_error(what + " " + path.string() + ": is a directory, expected a JSON file");
  if (!S_ISREG(st.st_mode)) throw usage_error(what + " " + path.string() + ": is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw usage_error(what + " " + path.string() + ": larger than " + std::to_string(max_bytes) + " bytes");
  if (opened) *opened = st;
  return read_bounded(fd.get(), max_bytes, what + " " + path.string());
}

}  // namespace gpurun
