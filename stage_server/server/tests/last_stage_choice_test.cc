// The last stage's choice with a sequence's history, over real gRPC against
// an in-process StageGroup: the sampling a sequence's first entry brings is
// kept for its later steps (the coordinator sends it once, to the last stage
// only); logit_bias, penalties and min_tokens edit the logits as
// runtime::PenaltyEdits says; log-probs come back with the chosen token; a
// step of a sequence the stage has no sampling for is refused by name.
#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "seam/core/status.h"
#include "seam/runtime/stage_group.h"
#include "seam/runtime/token_sampler.h"
#include "stage_fixtures.h"
#include "stage_process.h"

namespace seam::server {
namespace {

using namespace testing;  // NOLINT: the fixtures of these tests

const std::vector<int32_t> kPrompt = {3, 14, 15, 92, 65, 35};

std::unique_ptr<runtime::StageGroup> Reference() {
  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> group =
      runtime::StageGroup::Create(CheckpointDir(), 1, 1, boundary::ReductionPolicy::kAuto);
  SEAM_CHECK_OK(group.status());
  return std::move(*group);
}

// The reference's logits row of a step.
Tensor Row(runtime::StageGroup& group, uint64_t id, const std::vector<int32_t>& tokens, int64_t start) {
  absl::StatusOr<std::vector<Tensor>> logits = group.Step({{id, tokens, start}}, false);
  SEAM_CHECK_OK(logits.status());
  return (*logits)[0];
}

int32_t Choose(const Tensor& row, const runtime::TokenChoice& choice, runtime::TokenLogprobs* lp = nullptr) {
  std::vector<runtime::TokenLogprobs> all;
  absl::StatusOr<std::vector<int32_t>> t = runtime::ChooseTokens(row, {choice}, lp ? &all : nullptr);
  SEAM_CHECK_OK(t.status());
  if (lp) *lp = all[0];
  return (*t)[0];
}

TEST(LastStageChoice, TheFirstEntrysSamplingServesTheSequencesLaterSteps) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  RunClient run(stage);
  v1::MicrobatchDescriptor prefill = Descriptor(1, 1);
  AddSequence(prefill, 5, kPrompt, 0, true);
  v1::SequenceSampling* s = prefill.mutable_sequences(0)->mutable_sampling();
  s->set_temperature(0.9f);
  s->set_seed(777);
  s->set_prompt_tokens(static_cast<uint32_t>(kPrompt.size()));
  const v1::MicrobatchResult first = run.Exchange(prefill);
  ASSERT_FALSE(first.has_error()) << first.error().message();
  v1::MicrobatchDescriptor decode = Descriptor(2, 2);
  AddSequence(decode, 5, {first.sequences(0).sampled_token()}, kPrompt.size(), false);
  decode.mutable_sequences(0)->clear_sampling();  // as the coordinator sends a decode step
  const v1::MicrobatchResult second = run.Exchange(decode);
  ASSERT_FALSE(second.has_error()) << second.error().message();

  v1::MicrobatchDescriptor stranger = Descriptor(3, 3);
  AddSequence(stranger, 6, {1}, 4, false);
  stranger.mutable_sequences(0)->clear_sampling();
  ExpectError(run.Exchange(stranger), absl::StatusCode::kInvalidArgument,
              "sequences[0]: sequence 6 (request 'req-6') has no sampling");
  EXPECT_TRUE(run.Close().ok());

  auto group = Reference();
  runtime::TokenChoice c;
  c.params = kernels::SamplingParams{0.9f, 0, 1.0f, 777};
  const int32_t want_first = Choose(Row(*group, 5, kPrompt, 0), c);
  EXPECT_EQ(first.sequences(0).sampled_token(), want_first);
  c.step = 1;
  EXPECT_EQ(second.sequences(0).sampled_token(), Choose(Row(*group, 5, {want_first}, kPrompt.size()), c));
}

TEST(LastStageChoice, PenaltiesBiasesMinTokensAndLogprobsAsTheReferenceEditsThem) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  auto group = Reference();
  const Tensor prefill_row = Row(*group, 9, kPrompt, 0);
  const int32_t argmax = Choose(prefill_row, runtime::TokenChoice{kernels::SamplingParams{0.0f, 0, 1.0f, 0}});

  RunClient run(stage);
  v1::MicrobatchDescriptor prefill = Descriptor(1, 1);
  AddSequence(prefill, 9, kPrompt, 0, true);
  v1::SequenceSampling* s = prefill.mutable_sequences(0)->mutable_sampling();
  s->set_prompt_tokens(static_cast<uint32_t>(kPrompt.size()));
  s->set_frequency_penalty(1.5f);
  s->set_presence_penalty(0.5f);
  s->set_repetition_penalty(1.3f);
  v1::LogitBias* bias = s->add_logit_bias();
  bias->set_token_id(kPrompt[0]);
  bias->set_bias(2.0f);
  s->set_min_tokens(2);
  s->add_min_tokens_masked(argmax);  // the greedy token may not come first
  s->set_logprobs(true);
  s->set_top_logprobs(3);
  const v1::MicrobatchResult first = run.Exchange(prefill);
  ASSERT_FALSE(first.has_error()) << first.error().message();
  ASSERT_TRUE(first.sequences(0).has_sampled_logprobs());
  const int32_t t0 = first.sequences(0).sampled_token();
  EXPECT_NE(t0, argmax);
  v1::MicrobatchDescriptor decode = Descriptor(2, 2);
  AddSequence(decode, 9, {t0}, kPrompt.size(), false);
  decode.mutable_sequences(0)->clear_sampling();
  const v1::MicrobatchResult second = run.Exchange(decode);
  ASSERT_FALSE(second.has_error()) << second.error().message();
  EXPECT_TRUE(run.Close().ok());

  runtime::PenaltyRule rule;
  rule.frequency = 1.5f;
  rule.presence = 0.5f;
  rule.repetition = 1.3f;
  rule.bias = {{kPrompt[0], 2.0f}};
  rule.min_tokens = 2;
  rule.masked = {argmax};
  const std::set<int32_t> prompt(kPrompt.begin(), kPrompt.end());
  runtime::TokenChoice c;
  c.params.temperature = 0.0f;
  c.logprobs = true;
  c.top_logprobs = 3;
  c.edits = runtime::PenaltyEdits(rule, {}, prompt, 0);
  runtime::TokenLogprobs lp;
  EXPECT_EQ(t0, Choose(prefill_row, c, &lp));
  const v1::ChosenTokenLogprobs& got = first.sequences(0).sampled_logprobs();
  EXPECT_EQ(got.token_id(), t0);
  EXPECT_NEAR(got.logprob(), lp.chosen, 1e-6);
  ASSERT_EQ(got.top_size(), 3);
  EXPECT_EQ(got.top(0).token_id(), argmax);  // the model's own most likely, before edits
  c.step = 1;
  c.edits = runtime::PenaltyEdits(rule, {{t0, 1}}, prompt, 1);
  EXPECT_EQ(second.sequences(0).sampled_token(), Choose(Row(*group, 9, {t0}, kPrompt.size()), c));
}

// Chunked prefill: a chunk that ends before the prompt does chooses a token
// the coordinator drops; it is no generated token, so the penalties (here a
// frequency penalty of -100: any recorded token would win the next step)
// see the same history as for the prompt prefilled whole.
TEST(LastStageChoice, APrefillChunkBeforeThePromptsEndRecordsNoGeneratedToken) {
  StageProcess stage;
  grpc::Status rpc;
  ASSERT_EQ(Configure(stage, SingleStage(), &rpc).state(), v1::STAGE_STATE_READY) << rpc.error_message();
  RunClient run(stage);
  v1::SequenceSampling sampling;
  sampling.set_frequency_penalty(-100.0f);
  sampling.set_prompt_tokens(static_cast<uint32_t>(kPrompt.size()));
  uint64_t mb = 0;
  auto step = [&](uint64_t seq, const std::vector<int32_t>& tokens, uint64_t start, bool prefill) {
    v1::MicrobatchDescriptor d = Descriptor(mb + 1, mb + 1);
    ++mb;
    AddSequence(d, seq, tokens, start, prefill);
    if (prefill && start == 0) {
      *d.mutable_sequences(0)->mutable_sampling() = sampling;
    } else {
      d.mutable_sequences(0)->clear_sampling();
    }
    const v1::MicrobatchResult r = run.Exchange(d);
    EXPECT_FALSE(r.has_error()) << r.error().message();
    return r.has_error() ? -1 : r.sequences(0).sampled_token();
  };
  // Sequence 5: the prompt whole; sequence 7: in chunks of 2 and 4.
  std::vector<int32_t> whole = {step(5, kPrompt, 0, true)};
  step(7, {kPrompt.begin(), kPrompt.begin() + 2}, 0, true);
  std::vector<int32_t> chunked = {step(7, {kPrompt.begin() + 2, kPrompt.end()}, 2, true)};
  for (int i = 0; i < 3; ++i) {
    const uint64_t at = kPrompt.size() + static_cast<uint64_t>(i);
    whole.push_back(step(5, {whole.back()}, at, false));
    chunked.push_back(step(7, {chunked.back()}, at, false));
  }
  EXPECT_EQ(chunked, whole);
  EXPECT_TRUE(run.Close().ok());
}

}  // namespace
}  // namespace seam::server
