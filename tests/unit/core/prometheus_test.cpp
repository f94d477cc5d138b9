#include "serve/prometheus.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace gpurun {
namespace {

TEST(PrometheusTest, EscapesLabelValuesAsTheTextFormatSays) {
  EXPECT_EQ(prometheus_label_value("plain-name_1"), "plain-name_1");
  EXPECT_EQ(prometheus_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(prometheus_label_value("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(prometheus_label_value("two\nlines"), "two\\nlines");
  EXPECT_EQ(prometheus_label_value("\\\"\n"), "\\\\\\\"\\n");
  // Anything else (UTF-8, tabs, braces, commas) is kept as it is.
  EXPECT_EQ(prometheus_label_value("jöb\t{a=\"b\"},c"), "jöb\t{a=\\\"b\\\"},c");
}

TEST(PrometheusTest, EscapesHelpWithoutQuotes) {
  EXPECT_EQ(prometheus_help("say \"hi\"\\\nnext"), "say \"hi\"\\\\\\nnext");
}

TEST(PrometheusTest, FamilyThenSamples) {
  PrometheusText t;
  t.family("x_bytes", "gauge", "Bytes of x.\nSecond line.");
  t.sample("x_bytes", {{"id", "a\"b"}, {"name", ""}}, std::uint64_t{18446744073709551615u});
  t.sample("x_bytes", {}, std::uint64_t{0});
  EXPECT_EQ(t.text(),
            "# HELP x_bytes Bytes of x.\\nSecond line.\n"
            "# TYPE x_bytes gauge\n"
            "x_bytes{id=\"a\\\"b\",name=\"\"} 18446744073709551615\n"
            "x_bytes 0\n");
}

TEST(PrometheusTest, NumbersReadBackTheSame) {
  EXPECT_EQ(prometheus_number(0.0005), "0.0005");
  EXPECT_EQ(prometheus_number(1.0), "1");
  EXPECT_EQ(prometheus_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
  PrometheusText t;
  t.sample("s_seconds_sum", {}, 2.5);
  EXPECT_EQ(t.text(), "s_seconds_sum 2.5\n");
}

}  // namespace
}  // namespace gpurun
