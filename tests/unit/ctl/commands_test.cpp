#include "ctl/commands.hpp"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

TEST(Cli, UsageErrorsExitTwo) {
  for (const char* args :
       {"", "plan --bogus", "plan --profile", "k8s -f", "k8s --gpus 1", "k8s --container c",
        "k8s webhook-manifests --bogus", "k8s guard-manifests --bogus", "k8s guard-manifests --port", "profiles",
        "profiles show", "configure", "configure docker --set-default=maybe", "nope", "k8s runtimeclass --handler",
        "configure containerd --print=maybe", "configure docker --print=maybe"}) {
    CLI::App app;
    add_ctl_commands(app);
    try {
      app.parse(args, false);
      ADD_FAILURE() << "parsed: " << args;
    } catch (const CLI::ParseError& e) {
      testing::internal::CaptureStderr();
      EXPECT_EQ(report_parse_error(app, e), kExitUsage) << args;
      const std::string err = testing::internal::GetCapturedStderr();
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
      EXPECT_CONTAINS(err, "--help");
    }
  }
}

TEST(Cli, HelpExitsZero) {
  CLI::App app;
  add_ctl_commands(app);
  try {
    app.parse("k8s --help", false);
    ADD_FAILURE() << "no help";
  } catch (const CLI::ParseError& e) {
    testing::internal::CaptureStdout();
    EXPECT_EQ(report_parse_error(app, e), 0);
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_CONTAINS(out, "--filename");
    EXPECT_CONTAINS(out, "gpu-run-ctl k8s -f -");
  }
}

TEST(Cli, EveryConfigureSpeaksTheSameFlags) {
  CLI::App app;
  add_ctl_commands(app);
  const std::pair<const char*, const char*> engines[] = {
      {"docker", "--daemon-json"}, {"podman", "--hooks-dir"}, {"containerd", "--containerd-config"}};
  for (const auto& [engine, engine_file] : engines) {
    const CLI::App* cmd = app.get_subcommand("configure")->get_subcommand(engine);
    // Both spellings people type for "show it, write nothing".
    EXPECT_NO_THROW(cmd->get_option("--dry-run")) << engine;
    EXPECT_NO_THROW(cmd->get_option("--print")) << engine;
    // --config is gpu-run's config everywhere; the engine's own file has its own name.
    EXPECT_CONTAINS(cmd->get_option("--config")->get_description(), "The gpu-run config");
    EXPECT_NO_THROW(cmd->get_option(engine_file)) << engine;
  }
}

TEST(Cli, SizingFlagsSayTheSameOnEveryCommand) {
  CLI::App app;
  add_ctl_commands(app);
  const auto help = [&](const char* command, const char* flag) {
    return app.get_subcommand(command)->get_option(flag)->get_description();
  };
  for (const char* flag : {"--batch-size", "--prefetch-factor", "--profile-dir"})
    for (const char* command : {"calibrate", "tune"}) EXPECT_EQ(help(command, flag), help("plan", flag)) << flag;
  for (const char* flag : {"--profile", "--gpus", "--workers"})
    EXPECT_EQ(help("calibrate", flag), help("plan", flag)) << flag;
  // k8s -f reads each pod's own resources: its --profile is a default, and it has no --gpus.
  EXPECT_NE(help("k8s", "--profile"), help("plan", "--profile"));
  EXPECT_EQ(app.get_subcommand("k8s")->get_option_no_throw("--gpus"), nullptr);
  for (const char* flag : {"--profile", "--gpus"}) EXPECT_EQ(help("tune", flag), help("plan", flag)) << flag;
}

}  // namespace
}  // namespace gpurun
