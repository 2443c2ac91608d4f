// The stages own the KV capacity and the coordinator admits against it: a
// pipeline whose stages hold far less KV than the coordinator's --kv-blocks
// claims queues requests that do not fit now (all of them complete, none
// fails part-way) and refuses up front one that can never fit. Real
// seam-stage processes (PP 2) behind a real seam-coordinator on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <thread>

#include "local_pipeline.h"
#include "seam/testing/temp_dir.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {
namespace {

using ::testing::HasSubstr;

// The default model: 4 layers, 2 KV heads of 16 in f32; a stage of 2 layers
// holds 2 x 2 x 2 x 16 x 4 = 512 bytes of KV a token, 8 KiB a block of 16.
constexpr int kBlocks = 12;
constexpr int64_t kStageKvBytes = int64_t{kBlocks} * 16 * 512;

class KvAdmission : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access((std::string(SEAM_BIN_DIR) + "/seam-stage").c_str(), X_OK) != 0) GTEST_SKIP() << "no seam-stage";
    ASSERT_TRUE(WriteDefaultModel(model_.path()).ok());
    LocalPipelineOptions o;
    o.model_dir = model_.path();
    o.bin_dir = SEAM_BIN_DIR;
    o.pp = 2;
    o.startup_timeout = std::chrono::seconds(60);
    o.extra_stage_args = {"--kv-cache-bytes", std::to_string(kStageKvBytes)};
    o.extra_coordinator_args = {"--kv-blocks", "100000"};  // claims far more than the stages hold
    auto p = LocalPipeline::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    pipeline_ = std::move(*p);
    stub_ = v1::Coordinator::NewStub(
        pipeline_->ClientChannel());
  }

  grpc::Status Generate(const std::string& id, int prompt_tokens, int max_new, v1::GenerateResult* result) {
    v1::GenerateRequest r;
    r.set_request_id(id);
    std::vector<int32_t> prompt(prompt_tokens, 7);
    r.add_prompts()->mutable_token_ids()->Add(prompt.begin(), prompt.end());
    r.mutable_sampling()->set_max_new_tokens(max_new);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
    return stub_->GenerateAll(&context, r, result);
  }

  testing::TempDir model_{"seam_kv_admission_model"};
  std::unique_ptr<LocalPipeline> pipeline_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(KvAdmission, RequestsBeyondTheStagesKvWaitAndAllComplete) {
  // Each request takes 8 + 56 = 64 tokens = 4 blocks; six at once need 24 of the 12 blocks.
  std::vector<std::thread> clients;
  std::vector<grpc::Status> statuses(6);
  std::vector<int> tokens(6, 0);
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      v1::GenerateResult result;
      statuses[c] = Generate("kv-" + std::to_string(c), 8, 56, &result);
      if (statuses[c].ok() && result.completions_size() == 1) tokens[c] = result.completions(0).token_ids_size();
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < 6; ++c) {
    EXPECT_TRUE(statuses[c].ok()) << "client " << c << ": " << statuses[c].error_message() << "\n"
                                  << pipeline_->LogTails(10);
    EXPECT_EQ(tokens[c], 56) << "client " << c;
  }
}

TEST_F(KvAdmission, ARequestThatCanNeverFitTheStagesKvIsRefusedUpFront) {
  v1::GenerateResult result;
  const grpc::Status s = Generate("too-long", 8, kBlocks * 16, &result);  // 8 + 192 tokens > 12 blocks
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  // The limit a sequence meets is one DP group's KV (192 tokens here), stated as max_model_len.
  EXPECT_THAT(s.error_message(), HasSubstr("more than the 192 positions a sequence may hold (max_model_len)"));
  // The pipeline still serves.
  const grpc::Status ok = Generate("after", 4, 4, &result);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

}  // namespace
}  // namespace seam::cli
