// OpenSSL calls wrapped the way core wraps CUDA: a failed call becomes an
// absl::Status naming the call, the file and line, and the reasons OpenSSL
// queued (the queue is cleared, so a later call starts clean).
#pragma once

#include <memory>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/bn.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/status/status.h"

namespace seam::security {

// INTERNAL: "<call> failed at <file>:<line>: <OpenSSL's reasons>".
absl::Status OpenSslError(const char* call, const char* file, int line);

// Owning handles for the OpenSSL objects used here.
struct OpenSslFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free_all(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(ASN1_INTEGER* p) const { ASN1_INTEGER_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
template <typename T>
using OpenSslPtr = std::unique_ptr<T, OpenSslFree>;

}  // namespace seam::security

// Returns OpenSslError from the enclosing function unless `ok` holds; `call`
// is the OpenSSL function's text for the message.
#define SEAM_OPENSSL_CHECK(ok, call)                                                 \
  do {                                                                               \
    if (!(ok)) return ::seam::security::OpenSslError(call, __FILE__, __LINE__);      \
  } while (0)
