#include <iostream>
#include <string>
#include <vector>

#include "error.hpp"
#include "run_args.hpp"
#include "wrapper.hpp"

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    return gpurun::run_wrapper(gpurun::split_wrapper_args(args));
  } catch (const gpurun::Error& e) {
    std::cerr << "gpu-run: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "gpu-run: " << e.what() << "\n";
    return gpurun::kExitFailure;
  }
}
