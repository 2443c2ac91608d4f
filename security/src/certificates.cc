// Ephemeral CA and leaf certificates with OpenSSL 3's EVP and X509 APIs.
#include "seam/security/certificates.h"

#include <arpa/inet.h>

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "openssl_check.h"
#include "seam/core/status.h"

namespace seam::security {
namespace {

absl::StatusOr<OpenSslPtr<EVP_PKEY>> NewP256Key() {
  OpenSslPtr<EVP_PKEY> key(EVP_EC_gen("P-256"));
  SEAM_OPENSSL_CHECK(key != nullptr, "EVP_EC_gen(P-256)");
  return key;
}

absl::StatusOr<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  SEAM_OPENSSL_CHECK(size > 0 && data != nullptr, "BIO_get_mem_data");
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<PemCertificate> ToPem(X509* certificate, EVP_PKEY* key) {
  OpenSslPtr<BIO> cert_bio(BIO_new(BIO_s_mem()));
  OpenSslPtr<BIO> key_bio(BIO_new(BIO_s_mem()));
  SEAM_OPENSSL_CHECK(cert_bio != nullptr && key_bio != nullptr, "BIO_new(BIO_s_mem())");
  SEAM_OPENSSL_CHECK(PEM_write_bio_X509(cert_bio.get(), certificate) == 1, "PEM_write_bio_X509");
  SEAM_OPENSSL_CHECK(PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
                     "PEM_write_bio_PrivateKey");
  PemCertificate pem;
  SEAM_ASSIGN_OR_RETURN(pem.certificate, BioText(cert_bio.get()));
  SEAM_ASSIGN_OR_RETURN(pem.private_key, BioText(key_bio.get()));
  return pem;
}

absl::StatusOr<OpenSslPtr<X509>> ParseCertificate(const std::string& pem) {
  OpenSslPtr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  SEAM_OPENSSL_CHECK(bio != nullptr, "BIO_new_mem_buf");
  OpenSslPtr<X509> certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(OpenSslError("PEM_read_bio_X509", __FILE__, __LINE__).message());
  }
  return certificate;
}

absl::StatusOr<OpenSslPtr<EVP_PKEY>> ParseKey(const std::string& pem) {
  OpenSslPtr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  SEAM_OPENSSL_CHECK(bio != nullptr, "BIO_new_mem_buf");
  OpenSslPtr<EVP_PKEY> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(OpenSslError("PEM_read_bio_PrivateKey", __FILE__, __LINE__).message());
  }
  return key;
}

// Version 3, a random positive 127-bit serial, CN=`common_name`, validity
// from a minute ago (clock skew between processes) for `validity`.
absl::Status FillBasics(X509* x, const std::string& common_name, absl::Duration validity, EVP_PKEY* key) {
  SEAM_OPENSSL_CHECK(X509_set_version(x, X509_VERSION_3) == 1, "X509_set_version");
  OpenSslPtr<BIGNUM> serial(BN_new());
  SEAM_OPENSSL_CHECK(serial != nullptr && BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1,
                     "BN_rand");
  SEAM_OPENSSL_CHECK(BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x)) != nullptr, "BN_to_ASN1_INTEGER");
  SEAM_OPENSSL_CHECK(X509_gmtime_adj(X509_getm_notBefore(x), -60) != nullptr, "X509_gmtime_adj(notBefore)");
  SEAM_OPENSSL_CHECK(X509_gmtime_adj(X509_getm_notAfter(x), absl::ToInt64Seconds(validity)) != nullptr,
                     "X509_gmtime_adj(notAfter)");
  X509_NAME* name = X509_get_subject_name(x);
  SEAM_OPENSSL_CHECK(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                                reinterpret_cast<const unsigned char*>("seam"), -1, -1, 0) == 1,
                     "X509_NAME_add_entry_by_txt(O)");
  SEAM_OPENSSL_CHECK(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                                reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                                -1, 0) == 1,
                     "X509_NAME_add_entry_by_txt(CN)");
  SEAM_OPENSSL_CHECK(X509_set_pubkey(x, key) == 1, "X509_set_pubkey");
  return absl::OkStatus();
}

absl::Status AddExtension(X509* x, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, x, nullptr, nullptr, 0);
  OpenSslPtr<X509_EXTENSION> extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
  SEAM_OPENSSL_CHECK(extension != nullptr, "X509V3_EXT_conf_nid");
  SEAM_OPENSSL_CHECK(X509_add_ext(x, extension.get(), -1) == 1, "X509_add_ext");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PemCertificate> MakeCertificateAuthority(const std::string& common_name, absl::Duration validity) {
  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<EVP_PKEY> key, NewP256Key());
  OpenSslPtr<X509> x(X509_new());
  SEAM_OPENSSL_CHECK(x != nullptr, "X509_new");
  SEAM_RETURN_IF_ERROR(FillBasics(x.get(), common_name, validity, key.get()));
  SEAM_OPENSSL_CHECK(X509_set_issuer_name(x.get(), X509_get_subject_name(x.get())) == 1, "X509_set_issuer_name");
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), x.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), x.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), x.get(), NID_subject_key_identifier, "hash"));
  SEAM_OPENSSL_CHECK(X509_sign(x.get(), key.get(), EVP_sha256()) > 0, "X509_sign");
  return ToPem(x.get(), key.get());
}

absl::StatusOr<PemCertificate> IssueCertificate(const PemCertificate& ca, const CertificateRequest& request) {
  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<X509> ca_cert, ParseCertificate(ca.certificate));
  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<EVP_PKEY> ca_key, ParseKey(ca.private_key));
  std::vector<std::string> names;
  for (const std::string& ip : request.ip_addresses) {
    unsigned char buffer[16];
    if (inet_pton(AF_INET, ip.c_str(), buffer) != 1 && inet_pton(AF_INET6, ip.c_str(), buffer) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("'", ip, "' is not an IP address"));
    }
    names.push_back("IP:" + ip);
  }
  for (const std::string& dns : request.dns_names) names.push_back("DNS:" + dns);
  if (names.empty()) return absl::InvalidArgumentError("a certificate needs at least one DNS name or IP address");
  if (!request.server && !request.client) {
    return absl::InvalidArgumentError("a certificate must be for a server, a client or both");
  }
  std::vector<std::string> usages;
  if (request.server) usages.push_back("serverAuth");
  if (request.client) usages.push_back("clientAuth");

  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<EVP_PKEY> key, NewP256Key());
  OpenSslPtr<X509> x(X509_new());
  SEAM_OPENSSL_CHECK(x != nullptr, "X509_new");
  SEAM_RETURN_IF_ERROR(FillBasics(x.get(), request.common_name, request.validity, key.get()));
  SEAM_OPENSSL_CHECK(X509_set_issuer_name(x.get(), X509_get_subject_name(ca_cert.get())) == 1,
                     "X509_set_issuer_name");
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature"));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), ca_cert.get(), NID_ext_key_usage, absl::StrJoin(usages, ",")));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), ca_cert.get(), NID_subject_alt_name, absl::StrJoin(names, ",")));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), ca_cert.get(), NID_subject_key_identifier, "hash"));
  SEAM_RETURN_IF_ERROR(AddExtension(x.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  SEAM_OPENSSL_CHECK(X509_sign(x.get(), ca_key.get(), EVP_sha256()) > 0, "X509_sign");
  return ToPem(x.get(), key.get());
}

absl::Status VerifyCertificate(const std::string& ca_certificate, const std::string& certificate) {
  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<X509> ca, ParseCertificate(ca_certificate));
  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<X509> leaf, ParseCertificate(certificate));
  OpenSslPtr<X509_STORE> store(X509_STORE_new());
  SEAM_OPENSSL_CHECK(store != nullptr && X509_STORE_add_cert(store.get(), ca.get()) == 1, "X509_STORE_add_cert");
  OpenSslPtr<X509_STORE_CTX> context(X509_STORE_CTX_new());
  SEAM_OPENSSL_CHECK(context != nullptr && X509_STORE_CTX_init(context.get(), store.get(), leaf.get(), nullptr) == 1,
                     "X509_STORE_CTX_init");
  if (X509_verify_cert(context.get()) != 1) {
    return absl::UnauthenticatedError(absl::StrCat(
        "certificate does not verify: ", X509_verify_cert_error_string(X509_STORE_CTX_get_error(context.get()))));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SubjectAltNames(const std::string& certificate) {
  SEAM_ASSIGN_OR_RETURN(OpenSslPtr<X509> x, ParseCertificate(certificate));
  OpenSslPtr<GENERAL_NAMES> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x.get(), NID_subject_alt_name, nullptr, nullptr)));
  std::vector<std::string> out;
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_DNS) {
      const ASN1_IA5STRING* dns = name->d.dNSName;
      out.push_back(absl::StrCat("DNS:", std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                                     ASN1_STRING_length(dns))));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      const int family = ASN1_STRING_length(ip) == 4 ? AF_INET : AF_INET6;
      inet_ntop(family, ASN1_STRING_get0_data(ip), text, sizeof(text));
      out.push_back(absl::StrCat("IP:", text));
    }
  }
  return out;
}

}  // namespace seam::security
