// The credentials of a local pipeline (`seam run`, `seam serve`, the
// end-to-end tests): a fresh CA, one server certificate for every process
// (SAN IP:127.0.0.1, DNS:localhost), the coordinator's client certificate
// for mutual TLS with the stages, and a random bearer token, written 0600
// into a directory the caller owns. They expire with `validity`.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/security/credentials.h"

namespace seam::security {

struct LocalCredentialFiles {
  std::string ca_cert;      // ca.crt: the CA of every certificate below
  std::string server_cert;  // server.crt / server.key: every stage and the coordinator
  std::string server_key;
  std::string client_cert;  // client.crt / client.key: the coordinator, as the stages' client
  std::string client_key;
  std::string token;        // token: the client API's bearer token (64 hex characters)

  // The flags of each process, as ServerSecurityOptions / ClientSecurityOptions.
  ServerSecurityOptions StageServer() const;        // TLS + mutual TLS
  ServerSecurityOptions CoordinatorServer() const;  // TLS + token
  ClientSecurityOptions CoordinatorToStages() const;  // TLS + client certificate
  ClientSecurityOptions Client() const;             // TLS + token
};

// Makes the CA, the certificates and the token and writes them under `dir`
// (which must exist) with mode 0600. The CA's key is never written. The
// server certificate names localhost and 127.0.0.1, and each of
// `server_names` (an IP literal as an address, anything else as a DNS name)
// for a server reached beyond loopback.
absl::StatusOr<LocalCredentialFiles> WriteLocalCredentials(const std::string& dir,
                                                           absl::Duration validity = absl::Hours(24),
                                                           const std::vector<std::string>& server_names = {});

// A random token: 32 bytes from OpenSSL's CSPRNG as 64 hex characters.
absl::StatusOr<std::string> RandomToken();

}  // namespace seam::security
