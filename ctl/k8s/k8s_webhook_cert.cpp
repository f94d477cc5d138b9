#include "ctl/k8s/k8s_webhook_cert.hpp"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "serve/openssl_util.hpp"

namespace gpurun {
namespace {

using KeyPtr = OpensslPtr<EVP_PKEY, EVP_PKEY_free>;
using CertPtr = OpensslPtr<X509, X509_free>;

constexpr std::size_t kMaxPemBytes = 64 * 1024;

[[noreturn]] void fail(const std::string& what) { throw Error(what + ": " + openssl_error()); }

KeyPtr new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) fail("generate an EC P-256 key");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  OpensslPtr<X509_EXTENSION, X509_EXTENSION_free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) fail("add the certificate extension " + value);
}

// A certificate for `key` named `cn`, signed by `issuer_key` (`issuer` null: self-signed).
CertPtr new_cert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, long days, bool ca,
                 const std::vector<std::string>& dns_names) {
  CertPtr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) fail("make a certificate");
  OpensslPtr<BIGNUM, BN_free> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())))
    fail("make a serial number");
  // Valid from a few minutes ago, for clocks slightly behind this one.
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 86400L) || X509_set_pubkey(cert.get(), key) != 1)
    fail("set the certificate's validity and key");
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name) != 1)
    fail("set the certificate's names");
  X509* signer = issuer ? issuer : cert.get();
  add_extension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE");
  add_extension(cert.get(), signer, NID_key_usage,
                ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyEncipherment");
  add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
  add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (!ca) {
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth");
    std::string san;
    for (const std::string& dns : dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + dns;
    add_extension(cert.get(), signer, NID_subject_alt_name, san);
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) <= 0) fail("sign the certificate " + cn);
  return cert;
}

std::string to_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) fail("write a certificate as PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string to_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    fail("write a key as PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

CertPtr read_cert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  return cert;
}

KeyPtr read_key(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  return key;
}

}  // namespace

WebhookTlsPair make_webhook_tls_pair(const std::string& ca_name, const std::vector<std::string>& dns_names,
                                     long cert_days) {
  if (dns_names.empty()) throw Error("a serving certificate needs at least one DNS name");
  const KeyPtr ca_key = new_key();
  const CertPtr ca = new_cert(ca_name, ca_key.get(), nullptr, ca_key.get(), kWebhookCaDays, true, {});
  const KeyPtr key = new_key();
  const CertPtr cert = new_cert(dns_names.front(), key.get(), ca.get(), ca_key.get(), cert_days, false, dns_names);
  return {to_pem(ca.get()), to_pem(cert.get()), to_pem(key.get())};
}

bool webhook_tls_pair_ends_within(const WebhookTlsPair& pair, long days) {
  const std::time_t when = std::time(nullptr) + static_cast<std::time_t>(days) * 86400;
  for (const std::string* pem : {&pair.ca_cert, &pair.cert}) {
    const CertPtr cert = read_cert(*pem);
    std::time_t t = when;
    if (!cert || X509_cmp_time(X509_get0_notAfter(cert.get()), &t) <= 0) {
      ERR_clear_error();
      return true;
    }
  }
  return false;
}

std::optional<Error> check_webhook_tls_pair(const WebhookTlsPair& pair, const std::vector<std::string>& dns_names) {
  const CertPtr ca = read_cert(pair.ca_cert);
  if (!ca) return usage_error("ca.crt holds no PEM certificate");
  const CertPtr cert = read_cert(pair.cert);
  if (!cert) return usage_error("tls.crt holds no PEM certificate");
  const KeyPtr key = read_key(pair.key);
  if (!key) return usage_error("tls.key holds no PEM private key");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return usage_error("tls.key is not the key of tls.crt");
  }
  EVP_PKEY* ca_public = X509_get0_pubkey(ca.get());
  if (!ca_public || X509_verify(cert.get(), ca_public) != 1) {
    ERR_clear_error();
    return usage_error("tls.crt is not signed by ca.crt");
  }
  for (const std::string& dns : dns_names)
    if (X509_check_host(cert.get(), dns.c_str(), dns.size(), 0, nullptr) != 1)
      return usage_error("tls.crt is not for " + dns);
  return std::nullopt;
}

WebhookTlsPair webhook_tls_pair_in(const std::filesystem::path& dir, const std::string& ca_name,
                                   const std::vector<std::string>& dns_names, bool* renewed) {
  if (renewed) *renewed = false;
  const std::filesystem::path ca = dir / "ca.crt", cert = dir / "tls.crt", key = dir / "tls.key";
  std::error_code ec;
  int present = 0;
  for (const auto* f : {&ca, &cert, &key}) present += std::filesystem::exists(*f, ec) ? 1 : 0;
  if (present == 3) {
    WebhookTlsPair pair{read_small_file(ca, kMaxPemBytes, "--self-signed"),
                        read_small_file(cert, kMaxPemBytes, "--self-signed"),
                        read_small_file(key, kMaxPemBytes, "--self-signed")};
    if (const std::optional<Error> wrong = check_webhook_tls_pair(pair, dns_names))
      throw wrong->with_context("--self-signed " + dir.string())
          .with_hint("; remove ca.crt, tls.crt and tls.key there to make a new pair");
    if (!webhook_tls_pair_ends_within(pair, kWebhookRenewDays)) return pair;
    if (renewed) *renewed = true;
  } else if (present != 0) {
    throw usage_error("--self-signed " + dir.string() +
                      ": holds only some of ca.crt, tls.crt and tls.key; remove them to make a new pair, or restore "
                      "all three");
  } else {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("--self-signed: cannot create " + dir.string() + ": " + ec.message());
  }
  WebhookTlsPair pair = make_webhook_tls_pair(ca_name, dns_names);
  write_file_atomic(key.string(), pair.key, 0600);
  write_file_atomic(cert.string(), pair.cert, 0644);
  write_file_atomic(ca.string(), pair.ca_cert, 0644);
  return pair;
}

}  // namespace gpurun
