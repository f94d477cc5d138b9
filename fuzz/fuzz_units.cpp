// Size and count syntax, as read from flags, annotations, env and profiles.
#include <limits>

#include "base/error.hpp"
#include "base/units.hpp"
#include "fuzz/fuzz_input.hpp"
#include "oci/gpus.hpp"

using namespace gpurun;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);

  try {
    const std::uint64_t bytes = parse_size(text, "size");
    // What gpu-run hands to the engine must read back as the same size.
    GPU_RUN_FUZZ_CHECK(parse_size(engine_size(bytes)) == bytes);
    GPU_RUN_FUZZ_CHECK(!format_size(bytes).empty());
    GPU_RUN_FUZZ_CHECK(round_up(bytes, 4096) >= bytes);
  } catch (const Error&) {
  }

  for (std::uint64_t max : {std::uint64_t{1024}, std::uint64_t{1} << 20, std::numeric_limits<std::uint64_t>::max()}) {
    try {
      const std::uint64_t n = parse_count(text, "count", max);
      GPU_RUN_FUZZ_CHECK(n <= max);
    } catch (const Error&) {
    }
  }

  try {
    const GpuRequest r = parse_gpu_request(text);
    GPU_RUN_FUZZ_CHECK(r.original == text);
    GPU_RUN_FUZZ_CHECK(r.all || r.count <= 1024 || !r.devices.empty());
  } catch (const Error&) {
  }

  (void)count_visible_devices(text);
  (void)is_gpu_device_path(text);
  return 0;
}
