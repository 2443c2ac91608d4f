// Client request validation: each mistake is INVALID_ARGUMENT with a message
// that names the request, the prompt and the offending value.
#include "service/request_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "seam/v1/stage_service.pb.h"

namespace seam::coordinator {
namespace {

using ::testing::HasSubstr;

RequestLimits Limits() {
  RequestLimits l;
  l.vocab_size = 256;
  l.max_positions = 64;
  l.max_prompt_tokens = 32;
  l.default_max_new_tokens = 8;
  l.max_prompts = 4;
  return l;
}

v1::GenerateRequest Request(std::vector<std::vector<int32_t>> prompts, uint32_t max_new = 4) {
  v1::GenerateRequest r;
  r.set_request_id("req-7");
  for (const auto& p : prompts) r.add_prompts()->mutable_token_ids()->Add(p.begin(), p.end());
  r.mutable_sampling()->set_max_new_tokens(max_new);
  return r;
}

TEST(RequestValidation, AGoodRequestPasses) {
  EXPECT_TRUE(ValidateGenerateRequest(Request({{1, 2, 3}, {255}}), Limits()).ok());
}

TEST(RequestValidation, ACacheSaltOverItsBoundIsRefused) {
  v1::GenerateRequest r = Request({{1}});
  r.set_cache_salt(std::string(256, 's'));
  EXPECT_TRUE(ValidateGenerateRequest(r, Limits()).ok());
  r.set_cache_salt(std::string(257, 's'));
  const absl::Status s = ValidateGenerateRequest(r, Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("request 'req-7': cache_salt has 257 bytes, more than the 256 allowed"));
}

TEST(RequestValidation, EmptyPromptNamesThePrompt) {
  const absl::Status s = ValidateGenerateRequest(Request({{1}, {}}), Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request 'req-7': prompt 1 is empty");
}

TEST(RequestValidation, NoPromptsIsRefused) {
  const absl::Status s = ValidateGenerateRequest(Request({}), Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request 'req-7' has no prompts");
}

TEST(RequestValidation, TokenOutsideTheVocabularyNamesItsPosition) {
  const absl::Status s = ValidateGenerateRequest(Request({{1, 2, 256}}), Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request 'req-7': prompt 0 token 2 is 256, outside the vocabulary [0, 256)");
  EXPECT_EQ(ValidateGenerateRequest(Request({{-1}}), Limits()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidation, TooManyTokensForAMicrobatch) {
  const absl::Status s = ValidateGenerateRequest(Request({std::vector<int32_t>(33, 5)}), Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("too many tokens: prompt 0 has 33 tokens, more than the 32 tokens"));
}

TEST(RequestValidation, TooManyTokensForTheModelsPositions) {
  const absl::Status s = ValidateGenerateRequest(Request({std::vector<int32_t>(30, 5)}, 40), Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "request 'req-7': too many tokens: prompt 0 has 30 tokens + 40 new tokens = 70, more than the "
            "64 positions a sequence may hold (max_model_len)");
}

TEST(RequestValidation, DefaultMaxNewTokensIsApplied) {
  EXPECT_EQ(ResolvedMaxNewTokens(Request({{1}}, 0).sampling(), Limits()), 8);
  EXPECT_EQ(ResolvedMaxNewTokens(Request({{1}}, 3).sampling(), Limits()), 3);
}

TEST(RequestValidation, BadSamplingIsNamed) {
  v1::GenerateRequest r = Request({{1}});
  r.mutable_sampling()->set_temperature(-1);
  EXPECT_THAT(ValidateGenerateRequest(r, Limits()).message(), HasSubstr("sampling.temperature is -1"));
  r = Request({{1}});
  r.mutable_sampling()->add_stop_token_ids(300);
  EXPECT_THAT(ValidateGenerateRequest(r, Limits()).message(), HasSubstr("sampling.stop_token_ids[0] is 300"));
}

TEST(RequestValidation, TooManyPrompts) {
  const absl::Status s = ValidateGenerateRequest(Request({{1}, {1}, {1}, {1}, {1}}), Limits());
  EXPECT_EQ(s.message(), "request 'req-7' has 5 prompts, more than the 4 allowed");
}

TEST(RequestValidation, ARequestIdOfMoreThan128BytesIsRefused) {
  v1::GenerateRequest r = Request({{1}});
  r.set_request_id(std::string(128, 'a'));
  EXPECT_TRUE(ValidateGenerateRequest(r, Limits()).ok());
  r.set_request_id(std::string(100 * 1024, 'a'));
  const absl::Status s = ValidateGenerateRequest(r, Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request_id has 102400 bytes, more than the 128 allowed");  // not echoed back
  v1::ScoreRequest score;
  score.set_request_id(std::string(129, 'a'));
  v1::TokenSequence* seq = score.add_sequences();
  seq->add_token_ids(1);
  seq->add_token_ids(2);
  EXPECT_EQ(ValidateScoreRequest(score, Limits()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidation, ThePromptCountIsCheckedBeforeAnyPrompt) {
  v1::GenerateRequest r;
  r.set_request_id("many");
  for (int i = 0; i < 100000; ++i) r.add_prompts();  // empty ones
  EXPECT_EQ(ValidateGenerateRequest(r, Limits()).message(), "request 'many' has 100000 prompts, more than the 4 allowed");
}

TEST(RequestValidation, MoreThan64StopTokensAreRefused) {
  v1::GenerateRequest r = Request({{1}});
  for (int i = 0; i < 65; ++i) r.mutable_sampling()->add_stop_token_ids(1);
  EXPECT_THAT(ValidateGenerateRequest(r, Limits()).message(), HasSubstr("stop_token_ids has 65 entries"));
}

TEST(RequestValidation, TheDescriptorBoundCoversTheLargestLegalMicrobatch) {
  RequestLimits l = Limits();
  v1::MicrobatchDescriptor d;
  d.set_microbatch_id(~uint64_t{0});
  d.set_sequence_number(~uint64_t{0});
  d.set_epoch(~uint64_t{0});
  const int sequences = 8, tokens = 64;
  for (int i = 0; i < sequences; ++i) {
    v1::SequenceEntry* e = d.add_sequences();
    e->set_server_request_id(std::string(l.max_request_id_bytes, 'r'));
    e->set_sequence_id(~uint64_t{0});
    for (int t = 0; t < tokens / sequences; ++t) e->add_token_ids(std::numeric_limits<int32_t>::max());
    e->set_position_start(~uint64_t{0});
    e->set_is_prefill(true);
    e->set_return_token_logprobs(true);
    e->set_dp_group(~uint32_t{0});
    // The last stage's descriptor: each starting sequence's whole sampling.
    v1::SequenceSampling* sp = e->mutable_sampling();
    sp->set_temperature(1.5f);
    sp->set_top_k(~uint32_t{0});
    sp->set_top_p(0.5f);
    sp->set_seed(~uint64_t{0});
    sp->set_prompt_tokens(~uint32_t{0});
    sp->set_presence_penalty(1.5f);
    sp->set_frequency_penalty(1.5f);
    sp->set_repetition_penalty(1.5f);
    for (int k = 0; k < l.max_logit_bias; ++k) {
      v1::LogitBias* b = sp->add_logit_bias();
      b->set_token_id(std::numeric_limits<int32_t>::max());
      b->set_bias(-99.5f);
    }
    sp->set_min_tokens(~uint32_t{0});
    for (int k = 0; k < l.max_stop_tokens; ++k) sp->add_min_tokens_masked(std::numeric_limits<int32_t>::max());
    sp->set_logprobs(true);
    sp->set_top_logprobs(~uint32_t{0});
    d.add_finished_sequence_ids(~uint64_t{0});
  }
  EXPECT_LE(d.ByteSizeLong(), DescriptorBound(l, sequences, tokens));
}

TEST(RequestValidation, ScoringNeedsTwoTokens) {
  v1::ScoreRequest r;
  r.set_request_id("s");
  r.add_sequences()->add_token_ids(4);
  const absl::Status s = ValidateScoreRequest(r, Limits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request 's': sequence 0 has 1 token, at least 2 are needed");
}

}  // namespace
}  // namespace seam::coordinator
