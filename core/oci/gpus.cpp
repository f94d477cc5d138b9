#include "oci/gpus.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <sstream>

#include "base/error.hpp"
#include "base/units.hpp"

namespace gpurun {
namespace {

constexpr unsigned kMaxGpus = 1024;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

bool is_digits(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!std::isdigit(c)) return false;
  return true;
}

Error gpu_error(const std::string& text, const std::string& why) {
  return usage_error("--gpus '" + text.substr(0, 60) + "': " + why +
                     " (expected a count such as 2, all, or device=0,1)");
}

}  // namespace

GpuRequest parse_gpu_request(const std::string& text) {
  GpuRequest r;
  r.original = text;
  std::string s;
  for (char c : text)
    if (c != '"') s += c;
  if (s == "all") {
    r.all = true;
    return r;
  }
  if (is_digits(s)) {
    r.count = static_cast<unsigned>(parse_count(s, "--gpus", kMaxGpus));
    return r;
  }
  // CSV of key=value; "device=0,1" puts the ids after the key, so items without '='
  // continue the previous device list.
  bool in_devices = false;
  bool have_count = false;
  for (const std::string& item : split(s, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      if (!in_devices || item.empty()) throw gpu_error(text, "unexpected '" + item.substr(0, 30) + "'");
      r.devices.push_back(item);
      continue;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    in_devices = false;
    if (key == "device") {
      if (value.empty()) throw gpu_error(text, "empty device list");
      r.devices.push_back(value);
      in_devices = true;
    } else if (key == "count") {
      if (value == "all") {
        r.all = true;
      } else if (is_digits(value)) {
        r.count = static_cast<unsigned>(parse_count(value, "--gpus count", kMaxGpus));
      } else {
        throw gpu_error(text, "count must be a number or all");
      }
      have_count = true;
    } else if (key == "capabilities" || key == "driver" || key == "options") {
      continue;
    } else {
      throw gpu_error(text, "unknown key '" + key.substr(0, 30) + "'");
    }
  }
  if (!r.devices.empty()) {
    if (have_count) throw gpu_error(text, "give count or device, not both");
    r.count = static_cast<unsigned>(r.devices.size());
  } else if (!have_count) {
    throw gpu_error(text, "no count or device");
  }
  return r;
}

std::optional<unsigned> count_visible_devices(const std::string& value) {
  if (value.empty() || value == "none" || value == "void" || value == "NoDevFiles") return 0u;
  if (value == "all") return std::nullopt;
  unsigned n = 0;
  for (const std::string& item : split(value, ','))
    if (!item.empty()) ++n;
  return n;
}

bool is_gpu_device_path(const std::string& path) {
  const std::string prefix = "/dev/nvidia";
  return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
         is_digits(path.substr(prefix.size()));
}

unsigned count_host_gpus(const std::string& dev_dir) {
  // No control device, no usable NVIDIA GPU (CUDA opens it first): one failed access(2)
  // instead of listing /dev on every container start of a GPU-less host.
  if (::access((dev_dir + "/nvidiactl").c_str(), F_OK) != 0) return 0;
  unsigned n = 0;
  DIR* d = ::opendir(dev_dir.c_str());
  if (!d) return 0;
  while (struct dirent* e = ::readdir(d)) {
    if (is_gpu_device_path("/dev/" + std::string(e->d_name))) ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace gpurun
