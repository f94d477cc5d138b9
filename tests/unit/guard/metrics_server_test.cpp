#include "guard/metrics_server.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"

namespace gpurun {
namespace {

TEST(MetricsServerTest, ParsesLoopbackAddressesAndUnixSockets) {
  MetricsAddress a = parse_metrics_address("127.0.0.1:9400", false);
  EXPECT_FALSE(a.unix_socket);
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9400);
  EXPECT_TRUE(a.loopback);
  EXPECT_EQ(metrics_address_text(a), "127.0.0.1:9400");

  a = parse_metrics_address("[::1]:65535", false);
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 65535);
  EXPECT_EQ(metrics_address_text(a), "[::1]:65535");

  a = parse_metrics_address("localhost:1", false);
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_TRUE(parse_metrics_address("127.3.2.1:80", false).loopback);

  a = parse_metrics_address("unix:/run/gpu-run/metrics.sock", false);
  EXPECT_TRUE(a.unix_socket);
  EXPECT_EQ(a.path, "/run/gpu-run/metrics.sock");
  EXPECT_EQ(metrics_address_text(a), "unix:/run/gpu-run/metrics.sock");
}

TEST(MetricsServerTest, NonLoopbackOnlyWithMetricsPublic) {
  for (const char* text : {"0.0.0.0:9400", "10.1.2.3:9400", "[::]:9400", "[2001:db8::1]:9400"}) {
    try {
      parse_metrics_address(text, false);
      ADD_FAILURE() << text << " accepted without --metrics-public";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find("--metrics-public"), std::string::npos) << e.what();
    }
    const MetricsAddress a = parse_metrics_address(text, true);
    EXPECT_FALSE(a.loopback) << text;
  }
}

TEST(MetricsServerTest, RefusesMalformedAddressesWithWhatToGive) {
  for (const char* text :
       {"9400", ":9400", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:99999999999", "127.0.0.1:12a",
        "::1:9400", "[::1]", "example.com:9400", "unix:", "unix:relative.sock", "256.0.0.1:80"}) {
    try {
      parse_metrics_address(text, true);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << text;
      EXPECT_NE(std::string(e.what()).find("expected 127.0.0.1:PORT, [::1]:PORT or unix:/PATH"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_metrics_address("unix:/" + std::string(200, 'x'), false), Error);
}

}  // namespace
}  // namespace gpurun
