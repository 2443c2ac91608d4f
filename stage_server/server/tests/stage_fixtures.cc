// Shared fixtures of the stage server tests.
#include "stage_fixtures.h"

#include <gtest/gtest.h>

#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/testing/temp_dir.h"
#include "seam/testing/tiny_checkpoint.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::server::testing {

const std::string& CheckpointDir() {
  static const seam::testing::TempDir dir("seam_stage_ckpt");  // removed at exit
  static const bool written = [] {
    weights::RandomCheckpointOptions options;
    options.seed = 21;
    options.scale = 10.0f;
    SEAM_CHECK_OK(weights::WriteRandomCheckpoint(seam::testing::TinyConfig(false), options, dir.path()));
    return true;
  }();
  (void)written;
  return dir.path();
}

v1::StageConfig SingleStage() {
  v1::StageConfig c;
  c.set_model_dir(CheckpointDir());
  c.set_first_layer(0);
  c.set_last_layer(1);
  c.set_tp_size(1);
  c.set_attn_dp_size(1);
  c.set_pipeline_rank(0);
  c.set_pipeline_size(1);
  c.set_epoch(kEpoch);
  return c;
}

v1::MicrobatchDescriptor Descriptor(uint64_t id, uint64_t sequence_number) {
  v1::MicrobatchDescriptor d;
  d.set_microbatch_id(id);
  d.set_sequence_number(sequence_number);
  d.set_epoch(kEpoch);
  return d;
}

void AddSequence(v1::MicrobatchDescriptor& d, uint64_t sequence, const std::vector<int32_t>& tokens,
                 uint64_t start, bool prefill) {
  v1::SequenceEntry* s = d.add_sequences();
  s->set_server_request_id("req-" + std::to_string(sequence));
  s->set_sequence_id(sequence);
  for (int32_t t : tokens) s->add_token_ids(t);
  s->set_position_start(start);
  s->set_is_prefill(prefill);
  s->mutable_sampling()->set_temperature(0.0f);
}

v1::StageStatus Configure(StageProcess& stage, const v1::StageConfig& config, grpc::Status* status) {
  v1::StageStatus out;
  *status = stage.stub().Configure(Context().get(), config, &out);
  return out;
}

std::vector<int32_t> SampledTokens(const v1::MicrobatchResult& r) {
  std::vector<int32_t> tokens;
  for (const v1::SequenceResult& s : r.sequences()) {
    EXPECT_TRUE(s.has_sampled_token()) << s.ShortDebugString();
    tokens.push_back(s.sampled_token());
  }
  return tokens;
}

std::vector<int32_t> ReferenceArgmax(runtime::StageGroup& group, const std::vector<models::SequenceStep>& steps) {
  absl::StatusOr<std::vector<Tensor>> logits = group.Step(steps, false);
  SEAM_CHECK_OK(logits.status());
  std::vector<int32_t> tokens;
  for (const Tensor& row : *logits) {
    Tensor out = Tensor::Empty({1}, DType::kI32);
    SEAM_CHECK_OK(kernels::Argmax(row, out));
    tokens.push_back(out.data<int32_t>()[0]);
  }
  return tokens;
}

void ExpectError(const v1::MicrobatchResult& r, absl::StatusCode code, const std::string& field) {
  ASSERT_TRUE(r.has_error()) << r.ShortDebugString();
  EXPECT_EQ(r.error().code(), static_cast<int>(code)) << r.error().message();
  EXPECT_NE(r.error().message().find(field), std::string::npos) << r.error().message();
  EXPECT_EQ(r.sequences_size(), 0);
}

v1::StageStatus GetStatus(StageProcess& stage) {
  v1::StageStatus status;
  EXPECT_TRUE(stage.stub().GetStatus(Context().get(), v1::GetStatusRequest(), &status).ok());
  return status;
}

v1::MicrobatchResult RunClient::Read() {
  v1::MicrobatchResult result;
  EXPECT_TRUE(stream_->Read(&result));
  return result;
}

v1::MicrobatchResult RunClient::Exchange(const v1::MicrobatchDescriptor& d) {
  EXPECT_TRUE(Write(d));
  return Read();
}

grpc::Status RunClient::Close() {
  stream_->WritesDone();
  return stream_->Finish();
}

}  // namespace seam::server::testing
