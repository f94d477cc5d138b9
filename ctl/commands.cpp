#include "ctl/commands.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/program.hpp"
#include "ctl/configure/configure_containerd.hpp"
#include "ctl/configure/configure_docker.hpp"
#include "ctl/configure/configure_podman.hpp"
#include "ctl/doctor/doctor.hpp"
#include "ctl/guard_command.hpp"
#include "ctl/k8s/k8s.hpp"
#include "ctl/node/node_install.hpp"
#include "ctl/plan.hpp"
#include "ctl/profiles/calibrate.hpp"
#include "ctl/profiles/profiles.hpp"
#include "ctl/profiles/tune.hpp"
#include "ctl/reap.hpp"
#include "ctl/resize.hpp"
#include "ctl/watch.hpp"

namespace gpurun {
namespace {

// "gpu-run-ctl profiles validate": the deepest subcommand the command line reached.
std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  const CLI::App* current = &app;
  for (;;) {
    const auto chosen = current->get_subcommands();
    if (chosen.empty()) break;
    current = chosen.front();
    path += " " + current->get_name();
  }
  return path;
}

// CLI11's help with an option's exclusions moved out of its name column ("--config PATH
// Excludes: --undo" pushed the description onto the next line) to the end of its description.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    const std::string out = CLI::Formatter::make_option_opts(opt);
    return out.substr(0, out.find(" " + get_label("Excludes") + ":"));  // CLI11 writes them last
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string out = opt->get_description();
    // CLI11 keeps them in a set of pointers, in the order of their addresses: by name instead, so
    // the help reads the same in every process.
    std::vector<std::string> excluded;
    for (const CLI::Option* other : opt->get_excludes()) excluded.push_back(other->get_name());
    std::sort(excluded.begin(), excluded.end());
    for (std::size_t i = 0; i < excluded.size(); ++i) out += (i == 0 ? " (not with " : ", ") + excluded[i];
    return excluded.empty() ? out : out + ")";
  }
};

}  // namespace

void add_ctl_commands(CLI::App& app) {
  app.formatter(std::make_shared<HelpFormatter>());  // before the commands: each copies its parent's
  app.name("gpu-run-ctl");
  app.description("Plan, inspect and install gpu-run: /dev/shm sized for PyTorch DataLoader jobs in containers");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpu-run-ctl ") + GPU_RUN_VERSION);
  app.footer(
      "Run `gpu-run-ctl COMMAND --help` for a command's options. Exit status: 0 ok, 1 failure "
      "(or invalid profiles), 2 a wrong request.");
  add_plan_command(app);
  add_profiles_command(app);
  add_k8s_command(app);
  add_watch_command(app);
  add_resize_command(app);
  add_guard_command(app);
  add_calibrate_command(app);
  add_tune_command(app);
  add_doctor_command(app);
  add_reap_command(app);
  add_node_command(app);
  CLI::App* configure = app.add_subcommand(
      "configure", "Register gpu-run with docker (daemon.json), podman (hooks.d) or containerd (config.toml)");
  configure->require_subcommand(1);
  add_configure_docker_command(*configure);
  add_configure_podman_command(*configure);
  add_configure_containerd_command(*configure);
}

int report_parse_error(const CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
  const std::string where = command_path(app);
  std::string what = error.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&error)) {
    // CLI11 2.1 joins the words backwards (detail::rjoin): say them in the user's order, from the
    // first command on the path that has them left over (the one that threw).
    for (const CLI::App* current = &app; current;) {
      if (const std::vector<std::string> words = current->remaining(false); !words.empty()) {
        what = std::string(words.size() > 1 ? "The following arguments were not expected:"
                                            : "The following argument was not expected:");
        for (const std::string& w : words) what += " " + w;
        break;
      }
      const auto chosen = current->get_subcommands();
      current = chosen.empty() ? nullptr : chosen.front();
    }
  }
  for (char& c : what)
    if (c == '\n') c = ' ';
  std::cerr << where << ": " << what << " (see " << where << " --help)\n";
  return kExitUsage;
}

int ctl_main(int argc, char** argv) {
  CLI::App app;
  add_ctl_commands(app);
  return run_program("gpu-run-ctl", [&] {
    try {
      app.parse(argc, argv);
      return static_cast<int>(kExitOk);
    } catch (const CLI::ParseError& e) {
      return report_parse_error(app, e);
    }
  });
}

}  // namespace gpurun
