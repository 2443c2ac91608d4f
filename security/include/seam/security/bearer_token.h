// The bearer token of seam's client API. The server checks it on every call
// (BearerTokenProcessor, a gRPC AuthMetadataProcessor run before the call
// reaches the service); clients send it as "authorization: Bearer <token>"
// call metadata (BearerTokenCredentials).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/string_view.h"

namespace seam::security {

// Equal without leaking where they differ or how long `expected` is: both
// sides are hashed (SHA-256) and the digests compared with CRYPTO_memcmp.
bool TokenMatches(absl::string_view presented, absl::string_view expected);

// Accepts a call whose ":path" starts with one of `open_prefixes`
// (e.g. "/grpc.health.v1.Health/" for probes) without a token; every other
// call needs "authorization: Bearer <token>" with the right token, else
// UNAUTHENTICATED (missing header, another scheme, or a wrong token: the
// client has not proven who it is). Thread-safe, never blocks.
class BearerTokenProcessor : public grpc::AuthMetadataProcessor {
 public:
  BearerTokenProcessor(std::string token, std::vector<std::string> open_prefixes);
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

 private:
  const std::string token_;
  const std::vector<std::string> open_prefixes_;
};

// The ":path" prefix of grpc.health.v1, open to probes without a token.
inline constexpr char kHealthPathPrefix[] = "/grpc.health.v1.Health/";

// Call credentials adding "authorization: Bearer <token>" to every call.
// Allowed on any channel they are composed with (GRPC_SECURITY_NONE), so
// MakeChannelCredentials composes them only with TLS or with gRPC's local
// (loopback-only) credentials.
std::shared_ptr<grpc::CallCredentials> BearerTokenCredentials(const std::string& token);

}  // namespace seam::security
