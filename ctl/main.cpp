#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "error.hpp"

int main(int argc, char** argv) {
  CLI::App app;
  gpurun::add_ctl_commands(app);
  try {
    app.parse(argc, argv);
    return gpurun::kExitOk;
  } catch (const CLI::ParseError& e) {
    return gpurun::report_parse_error(app, e);
  } catch (const gpurun::Error& e) {
    std::cerr << "gpu-run-ctl: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "gpu-run-ctl: " << e.what() << "\n";
    return gpurun::kExitFailure;
  }
}
