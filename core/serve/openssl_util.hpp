#pragma once

// Small OpenSSL helpers for the programs that link OpenSSL (gpu-run-webhook's TLS,
// gpu-run-ctl k8s webhook-manifests --self-signed). Header-only: core itself does not link
// OpenSSL, and a program that includes this file links libcrypto.

#include <openssl/bio.h>
#include <openssl/err.h>

#include <memory>
#include <string>

namespace gpurun {

// The oldest error on OpenSSL's queue as text ("unknown OpenSSL error" when none); clears it.
inline std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// An owner of an OpenSSL object freed by `Free` (BIO_free, X509_free, EVP_PKEY_free...).
template <typename T, auto Free>
struct OpensslFree {
  void operator()(T* p) const { Free(p); }
};
template <typename T, auto Free>
using OpensslPtr = std::unique_ptr<T, OpensslFree<T, Free>>;

using BioPtr = OpensslPtr<BIO, BIO_free>;

}  // namespace gpurun
