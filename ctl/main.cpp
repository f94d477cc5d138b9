#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "program.hpp"

int main(int argc, char** argv) {
  CLI::App app;
  gpurun::add_ctl_commands(app);
  return gpurun::run_program("gpu-run-ctl", [&] {
    try {
      app.parse(argc, argv);
      return static_cast<int>(gpurun::kExitOk);
    } catch (const CLI::ParseError& e) {
      return gpurun::report_parse_error(app, e);
    }
  });
}
