// An ephemeral certificate authority and the certificates it issues, made in
// memory with OpenSSL 3 (EC P-256 keys, SHA-256 signatures, X.509 v3), for
// pipelines that live as long as one `seam run` / `seam serve`. Nothing here
// touches files; local_credentials.h writes them.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace seam::security {

// PEM text of a certificate and of its private key (PKCS#8).
struct PemCertificate {
  std::string certificate;
  std::string private_key;
};

// A self-signed CA certificate (basicConstraints CA:TRUE, keyCertSign) named
// CN=`common_name`, valid from a minute ago for `validity`.
absl::StatusOr<PemCertificate> MakeCertificateAuthority(const std::string& common_name, absl::Duration validity);

struct CertificateRequest {
  std::string common_name;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries ("127.0.0.1", "::1")
  bool server = true;                     // extendedKeyUsage serverAuth
  bool client = false;                    // extendedKeyUsage clientAuth
  absl::Duration validity = absl::Hours(24);
};

// A leaf certificate (CA:FALSE) for `request`, signed by `ca`.
// INVALID_ARGUMENT: unreadable CA PEM or a bad IP address; INTERNAL: an
// OpenSSL call failed (named, with file and line).
absl::StatusOr<PemCertificate> IssueCertificate(const PemCertificate& ca, const CertificateRequest& request);

// OK when `certificate` chains to `ca_certificate` and is valid now (X.509
// path validation); UNAUTHENTICATED with OpenSSL's reason otherwise.
absl::Status VerifyCertificate(const std::string& ca_certificate, const std::string& certificate);

// The subjectAltName entries as "DNS:name" / "IP:address", in order.
absl::StatusOr<std::vector<std::string>> SubjectAltNames(const std::string& certificate);

}  // namespace seam::security
