// argv of gpu-run (user's command line) and of gpu-run-runtime (what containerd passes).
// Arguments are separated by NUL or '\n'.
#include "base/error.hpp"
#include "engine/run_args.hpp"
#include "fuzz/fuzz_input.hpp"
#include "runtime/runtime.hpp"

using namespace gpurun;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = fuzz::split_any(fuzz::as_string(data, size), "\n");
  if (size == 0) args.clear();

  try {
    const WrapperOptions o = split_wrapper_args(args);
    GPU_RUN_FUZZ_CHECK(o.help || o.version || !o.image.empty() || args.size() > 0);
    // Nothing is lost or invented: every engine option and the command come from argv.
    GPU_RUN_FUZZ_CHECK(o.engine_options.size() + o.command.size() <= args.size());
    (void)scan_engine_options(o.engine_options);
    for (const std::string& a : o.command) (void)shell_quote(a);
  } catch (const Error&) {
  }
  (void)scan_engine_options(args);

  // The runtime wrapper must read any argv without throwing: it forwards it to runc.
  const RuntimeArgs r = parse_runtime_args(args);
  if (r.bundle) GPU_RUN_FUZZ_CHECK(r.subcommand == "create" || r.subcommand == "run");
  return 0;
}
