#include "base/clock.hpp"

#include <cstdint>
#include <cstdio>

namespace gpurun {

std::string utc_timestamp(std::time_t t) {
  // The civil date of a day count, as in Howard Hinnant's "chrono-compatible low-level date
  // algorithms" (days_from_civil's inverse). Not gmtime_r: glibc's reads /etc/localtime
  // (tzset) on the first call, 16K instructions of the hook's run for a time zone UTC ignores.
  const std::int64_t secs = static_cast<std::int64_t>(t);
  std::int64_t days = secs / 86400;
  std::int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;                                       // [0, 146096]
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const std::int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
  const std::int64_t day = doy - (153 * mp + 2) / 5 + 1;                           // [1, 31]
  const std::int64_t month = mp < 10 ? mp + 3 : mp - 9;                            // [1, 12]
  const std::int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  char buf[160];  // room for six 64-bit numbers, as the compiler cannot bound them
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", static_cast<long long>(year),
                static_cast<long long>(month), static_cast<long long>(day), static_cast<long long>(rem / 3600),
                static_cast<long long>(rem % 3600 / 60), static_cast<long long>(rem % 60));
  return buf;
}

}  // namespace gpurun
