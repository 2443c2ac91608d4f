// CoordinatorService over real gRPC on loopback, its driver over fake stage
// links: GetMetadata states every limit the service enforces on a request,
// each figure the one validation uses (a request past the stated prompt
// count is refused, one at it is served).
#include "service/coordinator_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include "fake_pipeline.h"

namespace seam::coordinator {
namespace {

using ::testing::HasSubstr;

// Figures unlike every default, so that a limit filled from the wrong field
// or from a constant shows.
RequestLimits Limits() {
  RequestLimits l;
  l.vocab_size = 256;
  l.max_positions = 64;
  l.max_prompt_tokens = 32;
  l.default_max_new_tokens = 5;
  l.max_prompts = 3;
  l.max_request_id_bytes = 40;
  l.max_stop_tokens = 6;
  l.max_context = 48;
  l.max_stop_strings = 7;
  l.max_stop_string_bytes = 9;
  l.max_logit_bias = 11;
  l.max_top_logprobs = 4;
  return l;
}

// The service behind a loopback port, and a stub to it.
class ServedCoordinator : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::Metadata metadata;
    metadata.mutable_model()->set_vocab_size(256);
    metadata.mutable_topology()->set_pipeline_size(2);
    service_ = std::make_unique<CoordinatorService>(pipeline_.driver.get(), Limits(), metadata);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::Coordinator::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pipeline_.driver.reset();
  }
  static std::unique_ptr<grpc::ClientContext> Context() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return c;
  }
  // `n` one-token prompts, greedy, 2 new tokens each.
  static v1::GenerateRequest Prompts(int n) {
    v1::GenerateRequest r;
    r.set_request_id("limits");
    for (int i = 0; i < n; ++i) r.add_prompts()->add_token_ids(10 + i);
    r.mutable_sampling()->set_max_new_tokens(2);
    return r;
  }

  testing::Pipeline pipeline_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(ServedCoordinator, GetMetadataStatesEveryRequestLimitTheServiceEnforces) {
  v1::Metadata m;
  const grpc::Status s = stub_->GetMetadata(Context().get(), v1::GetMetadataRequest(), &m);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::ServingLimits& l = m.limits();
  EXPECT_EQ(l.max_model_len(), 48u);  // the context, under the model's 64 positions
  EXPECT_EQ(l.max_prompt_tokens(), 32u);
  EXPECT_EQ(l.default_max_tokens(), 5u);
  EXPECT_EQ(l.max_prompts(), 3u);
  EXPECT_EQ(l.max_request_id_bytes(), 40u);
  EXPECT_EQ(l.max_stop_token_ids(), 6u);
  EXPECT_EQ(l.max_stop_strings(), 7u);
  EXPECT_EQ(l.max_stop_string_bytes(), 9u);
  EXPECT_EQ(l.max_logit_bias(), 11u);
  EXPECT_EQ(l.max_top_logprobs(), 4u);
  EXPECT_EQ(l.max_cache_salt_bytes(), static_cast<uint32_t>(kMaxCacheSaltBytes));
  EXPECT_EQ(m.model().vocab_size(), 256u);
}

TEST_F(ServedCoordinator, ARequestPastTheStatedPromptCountIsRefusedOneAtItIsServed) {
  v1::Metadata m;
  ASSERT_TRUE(stub_->GetMetadata(Context().get(), v1::GetMetadataRequest(), &m).ok());
  const int most = static_cast<int>(m.limits().max_prompts());
  v1::GenerateResult result;
  const grpc::Status over = stub_->GenerateAll(Context().get(), Prompts(most + 1), &result);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(over.error_message(), HasSubstr("has 4 prompts, more than the 3 allowed"));
  const grpc::Status at = stub_->GenerateAll(Context().get(), Prompts(most), &result);
  ASSERT_TRUE(at.ok()) << at.error_message();
  ASSERT_EQ(result.completions_size(), most);
  for (const v1::Completion& c : result.completions()) EXPECT_EQ(c.token_ids_size(), 2);
}

}  // namespace
}  // namespace seam::coordinator
