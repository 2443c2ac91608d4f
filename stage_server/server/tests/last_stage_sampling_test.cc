// The last stage's token choice over real gRPC: seeded sampling draws with
// step = the generated token's index (0 after the prompt), and token
// log-probs of a scored prompt, both against an in-process StageGroup.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/runtime/stage_group.h"
#include "stage_fixtures.h"
#include "stage_process.h"

namespace seam::server {
namespace {

using namespace testing;  // NOLINT: the fixtures of these tests

constexpr float kTemperature = 0.8f;
constexpr uint64_t kSeed = 1234;

void SetSampled(v1::SequenceEntry* s, bool logprobs) {
  s->mutable_sampling()->set_temperature(kTemperature);
  s->mutable_sampling()->set_seed(kSeed);
  s->set_return_token_logprobs(logprobs);
}

int32_t Draw(const Tensor& row, int32_t step) {
  Tensor out = Tensor::Empty({1}, DType::kI32);
  kernels::SamplingParams params{kTemperature, 0, 1.0f, kSeed};
  SEAM_CHECK_OK(kernels::Sample(row, params, Tensor::FromInts({step}, {1}), out));
  return out.data<int32_t>()[0];
}

double LogSoftmaxAt(const Tensor& logits, int64_t row, int32_t token) {
  const std::vector<float> v = logits.Rows(row, 1).Clone().ToFloats();
  double max = v[0], sum = 0.0;
  for (float x : v) max = std::fmax(max, x);
  for (float x : v) sum += std::exp(x - max);
  return v[token] - max - std::log(sum);
}

TEST(LastStageSampling, SeededDrawsAndTokenLogprobsMatchInProcessReference) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35};

  RunClient run(stage);
  v1::MicrobatchDescriptor prefill = Descriptor(1, 1);
  AddSequence(prefill, 5, prompt, 0, true);
  SetSampled(prefill.mutable_sequences(0), true);
  const v1::MicrobatchResult first = run.Exchange(prefill);
  ASSERT_FALSE(first.has_error()) << first.error().message();
  ASSERT_EQ(first.sequences_size(), 1);
  ASSERT_EQ(first.sequences(0).token_logprobs_size(), static_cast<int>(prompt.size()) - 1);

  v1::MicrobatchDescriptor decode = Descriptor(2, 2);
  AddSequence(decode, 5, {first.sequences(0).sampled_token()}, prompt.size(), false);
  SetSampled(decode.mutable_sequences(0), false);
  const v1::MicrobatchResult second = run.Exchange(decode);
  ASSERT_FALSE(second.has_error()) << second.error().message();
  EXPECT_TRUE(run.Close().ok());

  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> group =
      runtime::StageGroup::Create(CheckpointDir(), 1, 1, boundary::ReductionPolicy::kAuto);
  ASSERT_TRUE(group.ok()) << group.status();
  absl::StatusOr<std::vector<Tensor>> all = (*group)->Step({{5, prompt, 0}}, true);
  ASSERT_TRUE(all.ok()) << all.status();
  const Tensor& logits = (*all)[0];
  const int32_t want_first = Draw(logits.Rows(logits.dim(0) - 1, 1).Clone(), 0);
  EXPECT_EQ(first.sequences(0).sampled_token(), want_first);
  for (size_t j = 0; j + 1 < prompt.size(); ++j) {
    EXPECT_NEAR(first.sequences(0).token_logprobs(j), LogSoftmaxAt(logits, j, prompt[j + 1]), 1e-4) << "j=" << j;
  }
  absl::StatusOr<std::vector<Tensor>> next =
      (*group)->Step({{5, {want_first}, static_cast<int64_t>(prompt.size())}}, false);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(second.sequences(0).sampled_token(), Draw((*next)[0], 1));
}

}  // namespace
}  // namespace seam::server
