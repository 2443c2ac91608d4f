// Writing a local pipeline's CA, certificates and token.
#include "seam/security/local_credentials.h"

#include <arpa/inet.h>

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "openssl_check.h"
#include "seam/core/status.h"
#include "seam/security/certificates.h"
#include "seam/security/secret_files.h"

namespace seam::security {

ServerSecurityOptions LocalCredentialFiles::StageServer() const {
  ServerSecurityOptions o;
  o.tls_cert_file = server_cert;
  o.tls_key_file = server_key;
  o.tls_client_ca_file = ca_cert;
  return o;
}

ServerSecurityOptions LocalCredentialFiles::CoordinatorServer() const {
  ServerSecurityOptions o;
  o.tls_cert_file = server_cert;
  o.tls_key_file = server_key;
  o.auth_token_file = token;
  return o;
}

ClientSecurityOptions LocalCredentialFiles::CoordinatorToStages() const {
  ClientSecurityOptions o;
  o.tls_ca_file = ca_cert;
  o.tls_client_cert_file = client_cert;
  o.tls_client_key_file = client_key;
  return o;
}

ClientSecurityOptions LocalCredentialFiles::Client() const {
  ClientSecurityOptions o;
  o.tls_ca_file = ca_cert;
  o.auth_token_file = token;
  return o;
}

absl::StatusOr<std::string> RandomToken() {
  unsigned char bytes[32];
  SEAM_OPENSSL_CHECK(RAND_bytes(bytes, sizeof(bytes)) == 1, "RAND_bytes");
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::StatusOr<LocalCredentialFiles> WriteLocalCredentials(const std::string& dir, absl::Duration validity,
                                                           const std::vector<std::string>& server_names) {
  SEAM_ASSIGN_OR_RETURN(PemCertificate ca, MakeCertificateAuthority("seam local pipeline CA", validity));
  CertificateRequest server;
  server.common_name = "localhost";
  server.dns_names = {"localhost"};
  server.ip_addresses = {"127.0.0.1"};
  for (const std::string& name : server_names) {
    unsigned char address[sizeof(in6_addr)];
    const bool ip = inet_pton(AF_INET, name.c_str(), address) == 1 || inet_pton(AF_INET6, name.c_str(), address) == 1;
    (ip ? server.ip_addresses : server.dns_names).push_back(name);
  }
  server.validity = validity;
  SEAM_ASSIGN_OR_RETURN(PemCertificate server_pem, IssueCertificate(ca, server));
  CertificateRequest client;
  client.common_name = "seam-coordinator";
  client.dns_names = {"localhost"};
  client.ip_addresses = {"127.0.0.1"};
  client.server = false;
  client.client = true;
  client.validity = validity;
  SEAM_ASSIGN_OR_RETURN(PemCertificate client_pem, IssueCertificate(ca, client));
  SEAM_ASSIGN_OR_RETURN(std::string token, RandomToken());

  LocalCredentialFiles files;
  files.ca_cert = dir + "/ca.crt";
  files.server_cert = dir + "/server.crt";
  files.server_key = dir + "/server.key";
  files.client_cert = dir + "/client.crt";
  files.client_key = dir + "/client.key";
  files.token = dir + "/token";
  SEAM_RETURN_IF_ERROR(WritePrivateFile(files.ca_cert, ca.certificate));
  SEAM_RETURN_IF_ERROR(WritePrivateFile(files.server_cert, server_pem.certificate));
  SEAM_RETURN_IF_ERROR(WritePrivateFile(files.server_key, server_pem.private_key));
  SEAM_RETURN_IF_ERROR(WritePrivateFile(files.client_cert, client_pem.certificate));
  SEAM_RETURN_IF_ERROR(WritePrivateFile(files.client_key, client_pem.private_key));
  SEAM_RETURN_IF_ERROR(WritePrivateFile(files.token, token + "\n"));
  return files;
}

}  // namespace seam::security
