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

}  // namespace gpurun
