// Bearer token: the server-side check and the client-side metadata plugin.
#include "seam/security/bearer_token.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/match.h"

namespace seam::security {
namespace {

constexpr char kScheme[] = "Bearer ";

class TokenPlugin : public grpc::MetadataCredentialsPlugin {
 public:
  explicit TokenPlugin(std::string token) : header_(kScheme + token) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "seam-bearer-token"; }
  grpc::Status GetMetadata(grpc::string_ref, grpc::string_ref, const grpc::AuthContext&,
                           std::multimap<std::string, std::string>* metadata) override {
    metadata->emplace("authorization", header_);
    return grpc::Status::OK;
  }
  std::string DebugString() override { return "seam bearer token"; }

 private:
  const std::string header_;
};

}  // namespace

bool TokenMatches(absl::string_view presented, absl::string_view expected) {
  unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(presented.data()), presented.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(expected.data()), expected.size(), b);
  return CRYPTO_memcmp(a, b, sizeof(a)) == 0;
}

BearerTokenProcessor::BearerTokenProcessor(std::string token, std::vector<std::string> open_prefixes)
    : token_(std::move(token)), open_prefixes_(std::move(open_prefixes)) {}

grpc::Status BearerTokenProcessor::Process(const InputMetadata& auth_metadata, grpc::AuthContext*,
                                           OutputMetadata* consumed_auth_metadata, OutputMetadata*) {
  const auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end()) {
    const absl::string_view p(path->second.data(), path->second.size());
    for (const std::string& prefix : open_prefixes_) {
      if (absl::StartsWith(p, prefix)) return grpc::Status::OK;
    }
  }
  const auto header = auth_metadata.find("authorization");
  if (header == auth_metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this server needs a bearer token: send \"authorization: Bearer <token>\" metadata "
                        "(seam generate --auth-token-file FILE)");
  }
  const absl::string_view value(header->second.data(), header->second.size());
  if (!absl::StartsWith(value, kScheme) || !TokenMatches(value.substr(sizeof(kScheme) - 1), token_)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the bearer token is not valid");
  }
  consumed_auth_metadata->emplace(std::string(header->first.data(), header->first.size()), std::string(value));
  return grpc::Status::OK;
}

std::shared_ptr<grpc::CallCredentials> BearerTokenCredentials(const std::string& token) {
  return grpc::experimental::MetadataCredentialsFromPlugin(std::make_unique<TokenPlugin>(token),
                                                           GRPC_SECURITY_NONE);
}

}  // namespace seam::security
