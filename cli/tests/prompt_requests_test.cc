// GenerateAllInRequests against a coordinator on a loopback port (real gRPC)
// that states a prompt count and refuses a request past it, as the real one
// does: more prompts than it states are cut into requests within it, the
// tokens come back in prompt order, and a coordinator that states none
// (older than ServingLimits.max_prompts) is sent at most 64 per request.
#include "prompt_requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace seam::cli {
namespace {

using ::testing::HasSubstr;

// States `max_prompts` (0: the field unset) and answers each prompt with its
// own first token and the prompt's index in the call; records each call.
class CountingCoordinator final : public v1::Coordinator::Service {
 public:
  CountingCoordinator(uint32_t max_prompts, size_t enforced) : max_prompts_(max_prompts), enforced_(enforced) {}

  grpc::Status GetMetadata(grpc::ServerContext*, const v1::GetMetadataRequest*, v1::Metadata* m) override {
    m->mutable_limits()->set_max_prompts(max_prompts_);
    return grpc::Status::OK;
  }
  grpc::Status GenerateAll(grpc::ServerContext*, const v1::GenerateRequest* request,
                           v1::GenerateResult* result) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.emplace_back(request->request_id(), request->prompts_size());
      max_new_tokens.push_back(request->sampling().max_new_tokens());
    }
    if (static_cast<size_t>(request->prompts_size()) > enforced_) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("request '", request->request_id(), "' has ", request->prompts_size(),
                                       " prompts, more than the ", enforced_, " allowed"));
    }
    for (int i = 0; i < request->prompts_size(); ++i) {
      v1::Completion* c = result->add_completions();
      c->add_token_ids(request->prompts(i).token_ids(0));
      c->add_token_ids(i);
    }
    return grpc::Status::OK;
  }

  std::mutex mu;
  std::vector<std::pair<std::string, int>> calls;  // request id, prompts
  std::vector<uint32_t> max_new_tokens;

 private:
  uint32_t max_prompts_;
  size_t enforced_;
};

struct Served {
  explicit Served(CountingCoordinator* service) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
    EXPECT_GT(port, 0);
    stub = v1::Coordinator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  ~Served() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5)); }
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Coordinator::Stub> stub;
};

std::vector<std::vector<int32_t>> Prompts(int n) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) out.push_back({100 + i, 7});
  return out;
}

std::chrono::system_clock::time_point Soon() { return std::chrono::system_clock::now() + std::chrono::seconds(10); }

v1::SamplingParams Greedy() {
  v1::SamplingParams s;
  s.set_max_new_tokens(2);
  return s;
}

// The prompt counts of the calls, sorted (the calls run concurrently).
std::vector<int> Counts(CountingCoordinator& c) {
  std::vector<int> out;
  for (const auto& [id, n] : c.calls) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PromptRequests, MorePromptsThanTheCoordinatorStatesAreCutIntoRequestsWithinIt) {
  CountingCoordinator coordinator(3, 3);
  Served served(&coordinator);
  absl::StatusOr<PromptRequestsResult> r =
      GenerateAllInRequests(*served.stub, Prompts(8), Greedy(), "seam-run", Soon());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts_per_request, 3u);
  EXPECT_EQ(r->requests, 3u);
  EXPECT_EQ(Counts(coordinator), (std::vector<int>{2, 3, 3}));
  std::vector<std::string> ids;
  for (const auto& [id, n] : coordinator.calls) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"seam-run-0", "seam-run-3", "seam-run-6"}));
  for (uint32_t m : coordinator.max_new_tokens) EXPECT_EQ(m, 2u);
  ASSERT_EQ(r->tokens.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    // Each prompt's own completion: its first token, and its index within its request.
    EXPECT_EQ(r->tokens[i], (std::vector<int32_t>{100 + i, i % 3})) << "prompt " << i;
  }
}

TEST(PromptRequests, PromptsWithinTheLimitTakeOneRequest) {
  CountingCoordinator coordinator(3, 3);
  Served served(&coordinator);
  absl::StatusOr<PromptRequestsResult> r =
      GenerateAllInRequests(*served.stub, Prompts(3), Greedy(), "seam-run", Soon());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 1u);
  EXPECT_EQ(Counts(coordinator), (std::vector<int>{3}));
}

TEST(PromptRequests, ACoordinatorStatingNoCountIsSentTheDocumentedDefault) {
  // It enforces 64, as every coordinator before the field did.
  CountingCoordinator coordinator(0, kOldCoordinatorMaxPrompts);
  Served served(&coordinator);
  absl::StatusOr<PromptRequestsResult> r =
      GenerateAllInRequests(*served.stub, Prompts(65), Greedy(), "seam-run", Soon());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts_per_request, 64u);
  EXPECT_EQ(Counts(coordinator), (std::vector<int>{1, 64}));
}

TEST(PromptRequests, ARefusedRequestFailsTheWholeWithItsCodeAndMessage) {
  // States 4 but enforces 2: the refusal reaches the caller, naming the request.
  CountingCoordinator coordinator(4, 2);
  Served served(&coordinator);
  absl::StatusOr<PromptRequestsResult> r =
      GenerateAllInRequests(*served.stub, Prompts(5), Greedy(), "seam-run", Soon());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("request 'seam-run-0' has 4 prompts, more than the 2 allowed"));
}

TEST(PromptRequests, AnUnreachableCoordinatorIsUnavailableNamingGetMetadata) {
  auto stub = v1::Coordinator::NewStub(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
  absl::StatusOr<PromptRequestsResult> r = GenerateAllInRequests(
      *stub, Prompts(2), Greedy(), "seam-run", std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("GetMetadata failed"));
}

}  // namespace
}  // namespace seam::cli
