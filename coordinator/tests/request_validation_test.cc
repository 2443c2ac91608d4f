// Client request validation: each mistake is INVALID_ARGUMENT with a message
// that names the request, the prompt and the offending value.
#include "service/request_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
            "model's 64 positions");
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
