// The token check as the server runs it on each call's metadata.
#include "seam/security/bearer_token.h"

#include <gtest/gtest.h>

namespace seam::security {
namespace {

grpc::Status Check(const std::vector<std::pair<std::string, std::string>>& metadata) {
  BearerTokenProcessor processor("s3cret", {kHealthPathPrefix});
  grpc::AuthMetadataProcessor::InputMetadata in;
  for (const auto& [k, v] : metadata) in.emplace(grpc::string_ref(k), grpc::string_ref(v));
  grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
  return processor.Process(in, nullptr, &consumed, &response);
}

TEST(BearerToken, TokenMatchesOnlyTheSameBytes) {
  EXPECT_TRUE(TokenMatches("abc", "abc"));
  EXPECT_FALSE(TokenMatches("abd", "abc"));
  EXPECT_FALSE(TokenMatches("ab", "abc"));
  EXPECT_FALSE(TokenMatches("", "abc"));
}

TEST(BearerToken, MissingTokenIsUnauthenticated) {
  const grpc::Status s = Check({{":path", "/seam.v1.Coordinator/GenerateAll"}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("needs a bearer token"), std::string::npos) << s.error_message();
}

TEST(BearerToken, WrongTokenOrSchemeIsUnauthenticated) {
  for (const char* header : {"Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer "}) {
    const grpc::Status s = Check({{":path", "/seam.v1.Coordinator/GenerateAll"}, {"authorization", header}});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
    EXPECT_EQ(s.error_message(), "the bearer token is not valid") << header;
  }
}

TEST(BearerToken, RightTokenIsAccepted) {
  EXPECT_TRUE(Check({{":path", "/seam.v1.Coordinator/GenerateAll"}, {"authorization", "Bearer s3cret"}}).ok());
}

TEST(BearerToken, HealthIsOpenReflectionIsNot) {
  EXPECT_TRUE(Check({{":path", "/grpc.health.v1.Health/Check"}}).ok());
  EXPECT_EQ(Check({{":path", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace seam::security
