#include "oci/runtime_chain.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

const RuntimeChain kNvidia{"/usr/bin/gpu-run-runtime", "/usr/bin/nvidia-container-runtime"};

TEST(RuntimeChainTest, TheTextIsAShebangForGpuRunRuntimeAndTheRuntimeLine) {
  const std::string text = runtime_chain_text(kNvidia, {"written by gpu-run-ctl", "second line"});
  EXPECT_EQ(text,
            "#!/usr/bin/gpu-run-runtime --chain\n# written by gpu-run-ctl\n# second line\n"
            "runtime=/usr/bin/nvidia-container-runtime\n");
  const std::optional<RuntimeChain> back = parse_runtime_chain(text, "f");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->runtime, kNvidia.runtime);
  EXPECT_EQ(back->next, kNvidia.next);
}

TEST(RuntimeChainTest, PathsThatCannotGoOnAShebangLineAreRefused) {
  for (const RuntimeChain& bad : {RuntimeChain{"gpu-run-runtime", "/usr/bin/x"},
                                  RuntimeChain{"/usr/bin/gpu-run-runtime", "nvidia-container-runtime"},
                                  RuntimeChain{"/opt/my dir/gpu-run-runtime", "/usr/bin/x"},
                                  RuntimeChain{"/usr/bin/gpu-run-runtime", "/usr/bin/x\nruntime=/bin/sh"},
                                  RuntimeChain{"/" + std::string(130, 'a'), "/usr/bin/x"}}) {
    const Error e = expect_error([&] { runtime_chain_text(bad, {}); });
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(RuntimeChainTest, AnotherFileIsNotAChainFile) {
  for (const char* text : {"", "#!/bin/sh\nexec runc \"$@\"\n",
                           "\x7f"
                           "ELF",
                           "#!/usr/bin/gpu-run-runtime\n", "#! --chain\nruntime=/x\n", "runtime=/usr/bin/x\n"})
    EXPECT_FALSE(parse_runtime_chain(text, "f")) << text;
}

TEST(RuntimeChainTest, AChainFileWithABadRuntimeLineIsAnErrorNamingTheLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"#!/usr/bin/gpu-run-runtime --chain\n# only comments\n", "f: no runtime= line"},
                        Case{"#!/usr/bin/gpu-run-runtime --chain\nruntime=runc\n", "f:2: runtime= 'runc'"},
                        Case{"#!/usr/bin/gpu-run-runtime --chain\nruntime=/a\nruntime=/b\n", "f:3: a second"},
                        Case{"#!/usr/bin/gpu-run-runtime --chain\nnext=/a\n", "f:2: expected runtime=PATH"}}) {
    const Error e = expect_error([&] { parse_runtime_chain(c.text, "f"); });
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_CONTAINS(e.what(), c.says);
    EXPECT_CONTAINS(e.what(), "gpu-run-ctl configure again");
  }
}

TEST(RuntimeChainTest, ReadsTheFile) {
  test::TempDir d;
  d.write("chain", runtime_chain_text(kNvidia, {}));
  EXPECT_EQ(read_runtime_chain(d / "chain").next, kNvidia.next);
  d.write("script", "#!/bin/sh\n");
  EXPECT_CONTAINS(expect_error([&] { read_runtime_chain(d / "script"); }).what(), "not a chain file");
}

}  // namespace
}  // namespace gpurun
