#include "ctl/k8s/k8s_webhook_cert.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

const std::vector<std::string> kNames = {"gpu-run-webhook.ns.svc", "gpu-run-webhook.ns"};

// What check_webhook_tls_pair finds wrong; "" for nothing.
std::string wrong_in(const WebhookTlsPair& pair, const std::vector<std::string>& names) {
  const std::optional<Error> wrong = check_webhook_tls_pair(pair, names);
  return wrong ? wrong->what() : "";
}

TEST(WebhookCertTest, MakesACaAndAServingCertificateForTheNames) {
  const WebhookTlsPair pair = make_webhook_tls_pair("test CA", kNames);
  EXPECT_EQ(pair.ca_cert.rfind("-----BEGIN CERTIFICATE-----", 0), 0u);
  EXPECT_EQ(pair.cert.rfind("-----BEGIN CERTIFICATE-----", 0), 0u);
  EXPECT_EQ(pair.key.rfind("-----BEGIN PRIVATE KEY-----", 0), 0u);
  EXPECT_EQ(wrong_in(pair, kNames), "");
  EXPECT_EQ(wrong_in(pair, {"gpu-run-webhook.other.svc"}), "tls.crt is not for gpu-run-webhook.other.svc");
  // Another pair's CA did not sign it, and another key is not its key.
  const WebhookTlsPair other = make_webhook_tls_pair("test CA", kNames);
  EXPECT_EQ(wrong_in({other.ca_cert, pair.cert, pair.key}, kNames), "tls.crt is not signed by ca.crt");
  EXPECT_EQ(wrong_in({pair.ca_cert, pair.cert, other.key}, kNames), "tls.key is not the key of tls.crt");
  EXPECT_EQ(wrong_in({"x", pair.cert, pair.key}, kNames), "ca.crt holds no PEM certificate");
}

TEST(WebhookCertTest, WritesThePairOnceAndReusesIt) {
  test::TempDir dir;
  const auto sub = dir.path() / "tls";
  const WebhookTlsPair made = webhook_tls_pair_in(sub, "test CA", kNames);
  struct stat st {};
  ASSERT_EQ(stat((sub / "tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const WebhookTlsPair again = webhook_tls_pair_in(sub, "test CA", kNames);
  EXPECT_EQ(again.cert, made.cert);
  EXPECT_EQ(again.ca_cert, made.ca_cert);
  // For another namespace's names the pair does not fit: the message says what to remove.
  Error e = expect_error([&] { webhook_tls_pair_in(sub, "test CA", {"gpu-run-webhook.other.svc"}); });
  EXPECT_EQ(e.exit_code(), kExitUsage);
  EXPECT_CONTAINS(e.what(), "remove ca.crt, tls.crt and tls.key");
  // A partial set is refused and left as it is.
  std::filesystem::remove(sub / "ca.crt");
  EXPECT_CONTAINS(expect_error([&] { webhook_tls_pair_in(sub, "test CA", kNames); }).what(), "holds only some");
  EXPECT_FALSE(std::filesystem::exists(sub / "ca.crt"));
}

TEST(WebhookCertTest, APairNearItsEndIsMadeAnew) {
  const WebhookTlsPair fresh = make_webhook_tls_pair("test CA", kNames);
  EXPECT_FALSE(webhook_tls_pair_ends_within(fresh, kWebhookRenewDays));
  EXPECT_TRUE(webhook_tls_pair_ends_within(fresh, kWebhookCertDays + 1)) << "the serving certificate's 825 days";
  const WebhookTlsPair short_lived = make_webhook_tls_pair("test CA", kNames, 10);
  EXPECT_TRUE(webhook_tls_pair_ends_within(short_lived, kWebhookRenewDays));
  EXPECT_TRUE(webhook_tls_pair_ends_within({"x", "y", "z"}, 1)) << "unreadable: counted as ending";

  test::TempDir dir;
  write_file_atomic((dir.path() / "tls.key").string(), short_lived.key, 0600);
  write_file_atomic((dir.path() / "tls.crt").string(), short_lived.cert, 0644);
  write_file_atomic((dir.path() / "ca.crt").string(), short_lived.ca_cert, 0644);
  bool renewed = false;
  const WebhookTlsPair next = webhook_tls_pair_in(dir.path(), "test CA", kNames, &renewed);
  EXPECT_TRUE(renewed);
  EXPECT_NE(next.ca_cert, short_lived.ca_cert) << "a new CA: its key was not kept";
  EXPECT_EQ(wrong_in(next, kNames), "");
  EXPECT_FALSE(webhook_tls_pair_ends_within(next, kWebhookRenewDays));
  EXPECT_EQ(read_small_file(dir.path() / "tls.crt", 1 << 16, "test"), next.cert) << "written over the old one";
  // Run again: the new pair is reused.
  const WebhookTlsPair again = webhook_tls_pair_in(dir.path(), "test CA", kNames, &renewed);
  EXPECT_FALSE(renewed);
  EXPECT_EQ(again.cert, next.cert);
}

}  // namespace
}  // namespace gpurun
