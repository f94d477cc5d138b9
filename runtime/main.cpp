#include "base/program.hpp"
#include "runtime/runtime.hpp"

int main(int argc, char** argv) {
  // run_runtime execs the real runtime; it returns only by throwing.
  return gpurun::run_program("gpu-run-runtime", [&]() -> int { gpurun::run_runtime(argc, argv); });
}
