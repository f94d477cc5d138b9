#include <iostream>

#include "error.hpp"
#include "runtime.hpp"

int main(int argc, char** argv) {
  try {
    gpurun::run_runtime(argc, argv);
  } catch (const gpurun::Error& e) {
    std::cerr << "gpu-run-runtime: " << e.what() << "\n";
    return e.exit_code() == 0 ? 1 : e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "gpu-run-runtime: " << e.what() << "\n";
    return 1;
  }
}
