#pragma once

#include <ctime>
#include <string>

namespace gpurun {

// `t` as an ISO 8601 UTC timestamp: 2026-12-02T15:48:08Z. The one format of every time
// gpu-run writes (logs, performance records, calibrations).
std::string utc_timestamp(std::time_t t);

}  // namespace gpurun
