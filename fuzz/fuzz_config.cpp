// /etc/gpu-run/config.json text.
#include "base/error.hpp"
#include "decision/config.hpp"
#include "fuzz/fuzz_input.hpp"

using namespace gpurun;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    Config c = parse_config(fuzz::as_string(data, size), "config.json");
    GPU_RUN_FUZZ_CHECK(c.memory_fraction_max > 0 && c.memory_fraction_max <= 1);
    GPU_RUN_FUZZ_CHECK(!c.runtimes.empty());
    (void)effective_gpu_request(c, c.engine);
  } catch (const Error&) {
  }
  return 0;
}
