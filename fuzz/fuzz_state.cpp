// The OCI state a runtime writes to the hook's stdin.
#include "base/error.hpp"
#include "fuzz/fuzz_input.hpp"
#include "oci/oci.hpp"

using namespace gpurun;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    OciState s = parse_state(fuzz::as_string(data, size));
    GPU_RUN_FUZZ_CHECK(!s.id.empty());
    GPU_RUN_FUZZ_CHECK(s.bundle.is_absolute());
    GPU_RUN_FUZZ_CHECK(s.pid >= 0);
  } catch (const Error&) {
  }
  return 0;
}
