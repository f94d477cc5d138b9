#pragma once

#include <string>

#include "engine/invocation.hpp"
#include "engine/run_args.hpp"

namespace gpurun {

// The JSON document of --json.
std::string invocation_json(const EngineInvocation& invocation);

// gpu-run's main flow: prints what was asked (--dry-run, --json, --explain) and execs
// the engine. Returns an exit code only when it does not exec.
int run_wrapper(const WrapperOptions& options);

// --help text.
std::string wrapper_help();

}  // namespace gpurun
