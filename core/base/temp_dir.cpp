#include "base/temp_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "base/error.hpp"

namespace gpurun {

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base == '/' ? base : "/tmp") + "/" + prefix + ".XXXXXX";
  if (!::mkdtemp(pattern.data())) throw system_error("create a temporary directory in " + pattern, errno);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  // A directory inside that was made unreadable (chmod 000) would stop the removal: give the
  // owner its permissions back first.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code ignored;
    if (it->is_directory(ignored)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
  }
  fs::remove_all(path_, ec);
}

}  // namespace gpurun
