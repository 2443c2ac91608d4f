// Server and channel credentials from files.
#include "seam/security/credentials.h"

#include <grpcpp/create_channel.h>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/security/bearer_token.h"
#include "seam/security/listen_address.h"
#include "seam/security/secret_files.h"

namespace seam::security {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> text = ReadFileForFlag(path, flag);
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  if (text->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " holds no PEM block"));
  }
  return text;
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  absl::StatusOr<std::string> token = ReadTokenFile(path, "--auth-token-file");
  if (!token.ok()) return absl::InvalidArgumentError(token.status().message());
  return token;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerSecurityOptions& o,
                                                                              const std::string& listen) {
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!o.tls() && !o.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs TLS: pass --tls-cert and --tls-key too");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (o.tls()) {
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    SEAM_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(o.tls_cert_file, "--tls-cert"));
    SEAM_ASSIGN_OR_RETURN(pair.private_key, ReadPem(o.tls_key_file, "--tls-key"));
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    if (!o.tls_client_ca_file.empty()) {
      SEAM_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(o.tls_client_ca_file, "--tls-client-ca"));
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
  } else {
    SEAM_RETURN_IF_ERROR(CheckPlaintextListen(listen, o.insecure));
    if (o.auth_token_file.empty()) return grpc::InsecureServerCredentials();
    if (!IsLoopbackAddress(listen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth-token-file on the plaintext address ", listen,
          " would send the token in the clear: pass --tls-cert and --tls-key, or listen on loopback"));
    }
    credentials = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  }
  if (!o.auth_token_file.empty()) {
    SEAM_ASSIGN_OR_RETURN(std::string token, ReadToken(o.auth_token_file));
    credentials->SetAuthMetadataProcessor(
        std::make_shared<BearerTokenProcessor>(std::move(token), o.open_path_prefixes));
  }
  return credentials;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const ClientSecurityOptions& o,
                                                                                const std::string& target) {
  if (o.tls_client_cert_file.empty() != o.tls_client_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-cert and --tls-client-key go together");
  }
  if (!o.tls() && !o.tls_client_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-cert needs --tls-ca (the CA of the server's certificate)");
  }
  std::shared_ptr<grpc::ChannelCredentials> channel;
  if (o.tls()) {
    grpc::SslCredentialsOptions ssl;
    SEAM_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(o.tls_ca_file, "--tls-ca"));
    if (!o.tls_client_cert_file.empty()) {
      SEAM_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(o.tls_client_cert_file, "--tls-client-cert"));
      SEAM_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(o.tls_client_key_file, "--tls-client-key"));
    }
    channel = grpc::SslCredentials(ssl);
  } else {
    if (o.auth_token_file.empty()) return grpc::InsecureChannelCredentials();
    if (!IsLoopbackAddress(target)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth-token-file without --tls-ca would send the token in the clear to ", target));
    }
    channel = grpc::experimental::LocalCredentials(LOCAL_TCP);
  }
  if (o.auth_token_file.empty()) return channel;
  SEAM_ASSIGN_OR_RETURN(std::string token, ReadToken(o.auth_token_file));
  return grpc::CompositeChannelCredentials(channel, BearerTokenCredentials(token));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ClientSecurityOptions& options,
                                                           const std::string& target) {
  SEAM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                        MakeChannelCredentials(options, target));
  return grpc::CreateChannel(target, credentials);
}

}  // namespace seam::security
