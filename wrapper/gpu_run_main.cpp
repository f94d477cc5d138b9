#include <string>
#include <vector>

#include "base/program.hpp"
#include "engine/run_args.hpp"
#include "wrapper/wrapper.hpp"

int main(int argc, char** argv) {
  return gpurun::run_program("gpu-run", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    return gpurun::run_wrapper(gpurun::split_wrapper_args(args));
  });
}
