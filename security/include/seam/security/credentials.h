// gRPC credentials of seam's servers and clients, from the command line's
// files. A server: TLS with --tls-cert/--tls-key (mutual TLS when
// --tls-client-ca names the CA its clients' certificates must chain to), a
// bearer token with --auth-token-file, and plaintext only on loopback or with
// --insecure. A client: TLS when --tls-ca names the CA of the server's
// certificate, its own certificate for mutual TLS, and the token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace seam::security {

struct ServerSecurityOptions {
  std::string tls_cert_file;       // PEM chain; with tls_key_file: TLS
  std::string tls_key_file;        // PEM private key
  std::string tls_client_ca_file;  // PEM CA: clients must present a certificate it signed
  std::string auth_token_file;     // every call but the open ones needs this bearer token
  bool insecure = false;           // allow plaintext on a non-loopback address
  // ":path" prefixes served without a token (health probes).
  std::vector<std::string> open_path_prefixes;

  bool tls() const { return !tls_cert_file.empty(); }
};

// Credentials for listening on `listen`. INVALID_ARGUMENT: a flag is missing
// its partner (--tls-cert without --tls-key, --tls-client-ca without TLS), a
// file is unreadable or empty, or a token is asked for on a non-loopback
// plaintext address (it would cross the network in the clear);
// FAILED_PRECONDITION: plaintext on a non-loopback address without
// `insecure` (CheckPlaintextListen). Both mean the operator must fix the
// command line (exit 2).
//
// Plaintext with a token on loopback uses gRPC's local credentials (they
// accept only loopback peers) so the token check can run.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerSecurityOptions& options,
                                                                              const std::string& listen);

struct ClientSecurityOptions {
  std::string tls_ca_file;           // PEM CA of the server's certificate; empty: plaintext
  std::string tls_client_cert_file;  // PEM chain presented for mutual TLS
  std::string tls_client_key_file;
  std::string auth_token_file;       // sent as "authorization: Bearer <token>"

  bool tls() const { return !tls_ca_file.empty(); }
};

// Channel credentials for reaching `target`. INVALID_ARGUMENT: a client
// certificate without its key (or without --tls-ca), an unreadable file, or
// a token to be sent in plaintext to a non-loopback target.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientSecurityOptions& options, const std::string& target);

// MakeChannelCredentials, then a channel to `target`.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ClientSecurityOptions& options,
                                                           const std::string& target);

}  // namespace seam::security
