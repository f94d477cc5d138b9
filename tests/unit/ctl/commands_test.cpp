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
       {"", "plan --bogus", "plan --profile", "k8s -f", "k8s --gpus", "k8s --container",
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

// The error line report_parse_error prints for `args`.
std::string parse_error_line(const std::string& args) {
  CLI::App app;
  add_ctl_commands(app);
  try {
    app.parse(args, false);
  } catch (const CLI::ParseError& e) {
    testing::internal::CaptureStderr();
    report_parse_error(app, e);
    return testing::internal::GetCapturedStderr();
  }
  ADD_FAILURE() << "parsed: " << args;
  return "";
}

TEST(Cli, UnexpectedWordsAreListedInTheUsersOrder) {
  EXPECT_EQ(
      parse_error_line("plan --gpus 2 one two three"),
      "gpu-run-ctl plan: The following arguments were not expected: one two three (see gpu-run-ctl plan --help)\n");
  EXPECT_EQ(parse_error_line("profiles show imagenet extra"),
            "gpu-run-ctl profiles show: The following argument was not expected: extra (see gpu-run-ctl profiles show "
            "--help)\n");
  EXPECT_CONTAINS(parse_error_line("doctor c --bogus x"), "were not expected: --bogus x (see");
}

TEST(Cli, TheRemovedK8sFormIsAnsweredWithTheFormThatReplacedIt) {
  CLI::App app;
  add_ctl_commands(app);
  const Error e = expect_error([&] { app.parse("k8s --profile imagenet --gpus 2 --container c", false); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "k8s: --gpus and --container were removed with the flag-only form");
  EXPECT_CONTAINS(e.what(), "gpu-run-ctl k8s -f MANIFEST");
  EXPECT_NOT_CONTAINS(e.what(), "not expected");
  CLI::App one;
  add_ctl_commands(one);
  EXPECT_CONTAINS(expect_error([&] { one.parse("k8s --memory 16g -f x.yaml", false); }).what(),
                  "k8s: --memory was removed");
  // Hidden: --help shows the current form only.
  CLI::App help;
  add_ctl_commands(help);
  EXPECT_NOT_CONTAINS(help.get_subcommand("k8s")->help(), "--gpus");
}

TEST(Cli, ConfigureHelpSaysWhatAnOptionExcludesAfterItsDescription) {
  CLI::App app;
  add_ctl_commands(app);
  const std::string help = app.get_subcommand("configure")->get_subcommand("docker")->help();
  EXPECT_NOT_CONTAINS(help, "Excludes");
  EXPECT_CONTAINS(help, "  --config PATH ");
  EXPECT_CONTAINS(help, "(not with --undo)");
  EXPECT_CONTAINS(help, "(not with --config, --runtime-path, --set-default)");
  // Each option keeps its line: name, type and default, then its description.
  EXPECT_CONTAINS(help, "--daemon-json PATH=/etc/docker/daemon.json");
  EXPECT_NOT_CONTAINS(app.get_subcommand("configure")->get_subcommand("podman")->help(), "Excludes");
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
  // k8s -f reads each pod's own resources: its --profile is a default, and it has no --gpus (the
  // removed form's, hidden, only answers with the form that replaced it).
  EXPECT_NE(help("k8s", "--profile"), help("plan", "--profile"));
  EXPECT_NOT_CONTAINS(app.get_subcommand("k8s")->help(), "--gpus");
  for (const char* flag : {"--profile", "--gpus"}) EXPECT_EQ(help("tune", flag), help("plan", flag)) << flag;
}

}  // namespace
}  // namespace gpurun
