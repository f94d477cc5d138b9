// What a container controls: annotations and env. The input is records separated by '\n'
// or NUL, each "<kind>key=value": 'A' a state annotation, 'S' a spec annotation, 'E' an env
// entry, 'M' the memory limit in bytes, 'C' cpuset CPUs, 'Q' the CPU quota, 'G' /dev/nvidiaN
// devices. Anything else is an env entry.
#include <cstdlib>

#include "base/error.hpp"
#include "fuzz/fuzz_decision.hpp"

using namespace gpurun;

namespace {

std::uint64_t number(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 10); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string> state_annotations;
  SpecFacts spec;
  spec.rootfs = "/run/bundle/rootfs";
  for (const std::string& record : fuzz::split_any(fuzz::as_string(data, size), "\n")) {
    if (record.empty()) continue;
    const char kind = record[0];
    const std::string rest = record.substr(1);
    const auto eq = rest.find('=');
    const std::string key = rest.substr(0, eq);
    const std::string value = eq == std::string::npos ? std::string() : rest.substr(eq + 1);
    switch (kind) {
      case 'A':
        state_annotations[key] = value;
        break;
      case 'S':
        spec.annotations[key] = value;
        break;
      case 'E':
        spec.env[key] = value;
        break;
      case 'M':
        if (number(rest) > 0) spec.memory_limit = number(rest);
        break;
      case 'C':
        spec.cpuset_cpus = static_cast<unsigned>(number(rest) & 0xffff);
        break;
      case 'Q':
        spec.cpu_quota = std::strtod(rest.c_str(), nullptr);
        break;
      case 'G':
        spec.gpu_devices = static_cast<unsigned>(number(rest) & 0xffff);
        break;
      default: {
        const auto e = record.find('=');
        if (e != std::string::npos) spec.env[record.substr(0, e)] = record.substr(e + 1);
      }
    }
  }
  fuzz::check_decisions(state_annotations, spec);
  return 0;
}
