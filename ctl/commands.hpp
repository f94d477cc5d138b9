#pragma once

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace gpurun {

// Registers every subcommand of gpu-run-ctl on `app`; each runs its run_x() when parsed.
void add_ctl_commands(CLI::App& app);

// Prints a command-line error as one line on stderr ("gpu-run-ctl plan: ...; see --help")
// and returns the exit code; for --help prints the help and returns 0.
int report_parse_error(const CLI::App& app, const CLI::ParseError& error);

// gpu-run-ctl's main: parses the command line and runs the chosen command. Here rather than in
// main.cpp so that CLI11, whose headers cost seconds of compile time in every file that includes
// them, is compiled in the ctl library's unity groups only (docs/BUILD.md).
int ctl_main(int argc, char** argv);

}  // namespace gpurun
