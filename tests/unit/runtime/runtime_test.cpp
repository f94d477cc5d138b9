#include "runtime.hpp"

#include <gtest/gtest.h>

#include "error.hpp"

namespace gpurun {
namespace {

TEST(RuntimeArgsTest, FindsTheBundleInEverySpelling) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--root", "/r", "--log", "/l.json", "--log-format", "json", "create",
                                              "--bundle", "/b", "--pid-file", "p", "id"},
                                             {"create", "--bundle=/b", "id"},
                                             {"--debug", "create", "-b", "/b", "id"},
                                             {"--systemd-cgroup", "create", "-b=/b", "id"},
                                             {"--root=/r", "run", "--bundle", "/b", "id"}}) {
    RuntimeArgs r = parse_runtime_args(args);
    EXPECT_TRUE(r.subcommand == "create" || r.subcommand == "run");
    EXPECT_EQ(r.bundle, "/b") << args[0];
  }
  RuntimeArgs r = parse_runtime_args({"--root", "/r", "--log", "/l.json", "--log-format", "json", "create", "id"});
  EXPECT_EQ(r.log, "/l.json");
  EXPECT_EQ(r.log_format, "json");
  EXPECT_FALSE(r.bundle);
}

TEST(RuntimeArgsTest, OtherSubcommandsAreNotInspected) {
  RuntimeArgs r = parse_runtime_args({"--root", "/r", "start", "--bundle", "/b", "id"});
  EXPECT_EQ(r.subcommand, "start");
  EXPECT_FALSE(r.bundle);
  EXPECT_EQ(parse_runtime_args({"--version"}).subcommand, "");
  EXPECT_EQ(parse_runtime_args({"features"}).subcommand, "features");
}

TEST(RuntimeArgsTest, FindsARealRuntimeButNeverItself) {
  EXPECT_THROW(find_real_runtime({"/nonexistent/runc", "no-such-runtime-xyz"}), Error);
  EXPECT_EQ(find_real_runtime({"no-such-runtime-xyz", "/bin/sh"}), "/bin/sh");
}

}  // namespace
}  // namespace gpurun
