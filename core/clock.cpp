#include "clock.hpp"

namespace gpurun {

std::string utc_timestamp(std::time_t t) {
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpurun
