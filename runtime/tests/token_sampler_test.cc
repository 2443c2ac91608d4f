// Token choice on the logits' device: greedy rows by one Argmax, sampled rows
// with their own parameters, the same tokens as a row-by-row kernels::Sample
// on the host (and, on a GPU, the same as the host's).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "seam/core/device_memory.h"
#include "seam/runtime/token_sampler.h"

namespace seam::runtime {
namespace {

Tensor Logits(int64_t rows, int64_t vocab) {
  std::vector<float> v(rows * vocab);
  for (int64_t i = 0; i < rows * vocab; ++i) v[i] = static_cast<float>((i * 7919) % 613) / 97.0f - 3.0f;
  return Tensor::FromFloats(v, {rows, vocab});
}

std::vector<TokenChoice> Mixed() {
  std::vector<TokenChoice> c(4);
  c[1].params.temperature = 0.8f;
  c[1].params.seed = 11;
  c[1].step = 3;
  c[2].params.temperature = 0.0f;
  c[3].params.temperature = 1.2f;
  c[3].params.top_k = 5;
  c[3].params.top_p = 0.9f;
  c[3].params.seed = 99;
  c[3].step = 17;
  c[0].params.temperature = 0.0f;
  return c;
}

// What the stage sampled before: one row at a time on the host.
std::vector<int32_t> RowByRow(const Tensor& logits, const std::vector<TokenChoice>& choices) {
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < choices.size(); ++i) {
    Tensor out = Tensor::Empty({1}, DType::kI32);
    Tensor row = logits.Rows(static_cast<int64_t>(i), 1).Clone();
    EXPECT_TRUE(kernels::Sample(row, choices[i].params, Tensor::FromInts({choices[i].step}, {1}), out).ok());
    tokens.push_back(out.data<int32_t>()[0]);
  }
  return tokens;
}

TEST(TokenChoice, AllGreedyRowsAreTheirArgmax) {
  const Tensor logits = Logits(3, 50);
  std::vector<TokenChoice> greedy(3);
  for (TokenChoice& c : greedy) c.params.temperature = 0.0f;
  auto tokens = ChooseTokens(logits, greedy);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, RowByRow(logits, greedy));
}

TEST(TokenChoice, MixedRowsDrawWhatTheHostDrawsRowByRow) {
  const Tensor logits = Logits(4, 50);
  auto tokens = ChooseTokens(logits, Mixed());
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, RowByRow(logits, Mixed()));
}

TEST(TokenChoice, CountsThatDifferAreInvalidArgument) {
  auto tokens = ChooseTokens(Logits(2, 8), Mixed());
  EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument) << tokens.status();
}

TEST(TokenChoice, OnTheGpuTheTokensAreTheHosts) {
  if (!CudaAvailable()) GTEST_SKIP() << "no GPU";
  const Tensor logits = Logits(4, 3000);
  auto device_logits = logits.To(Device::CUDA(0));
  ASSERT_TRUE(device_logits.ok()) << device_logits.status();
  auto tokens = ChooseTokens(*device_logits, Mixed());
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, RowByRow(logits, Mixed()));
}

TEST(TokenChoice, EditedRowsChooseFromTheEditedLogitsOfTheirOwnRow) {
  const Tensor logits = Logits(3, 50);
  std::vector<TokenChoice> c(3);
  for (TokenChoice& x : c) x.params.temperature = 0.0f;
  // Row 1 masks its argmax; row 2 lifts token 3 above everything.
  const int32_t best1 = RowByRow(logits, c)[1];
  c[1].edits = {LogitEdit{best1, 1.0f, -std::numeric_limits<float>::infinity()}};
  c[2].edits = {LogitEdit{3, 1.0f, 100.0f}};
  auto tokens = ChooseTokens(logits, c);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)[0], RowByRow(logits, c)[0]);
  EXPECT_NE((*tokens)[1], best1);
  EXPECT_EQ((*tokens)[2], 3);
  // The logits themselves stay the model's.
  EXPECT_EQ(RowByRow(logits, std::vector<TokenChoice>(3, c[0]))[1], best1);
}

TEST(TokenChoice, LogprobsAreTheUneditedLogSoftmaxOfTheChosenAndTopTokens) {
  const Tensor logits = Logits(2, 50);
  std::vector<TokenChoice> c(2);
  c[0].params.temperature = 0.0f;
  c[0].logprobs = true;
  c[0].top_logprobs = 3;
  c[1].params.temperature = 0.0f;
  c[1].edits = {LogitEdit{7, 1.0f, 50.0f}};
  c[1].logprobs = true;
  std::vector<TokenLogprobs> lp;
  auto tokens = ChooseTokens(logits, c, &lp);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(lp.size(), 2u);
  const std::vector<float> v = logits.ToFloats();
  const auto log_softmax = [&](int row, int32_t token) {
    double mx = -1e30, sum = 0;
    for (int j = 0; j < 50; ++j) mx = std::max(mx, double(v[row * 50 + j]));
    for (int j = 0; j < 50; ++j) sum += std::exp(v[row * 50 + j] - mx);
    return v[row * 50 + token] - mx - std::log(sum);
  };
  EXPECT_NEAR(lp[0].chosen, log_softmax(0, (*tokens)[0]), 1e-5);
  ASSERT_EQ(lp[0].top.size(), 3u);
  EXPECT_EQ(lp[0].top[0].first, (*tokens)[0]);  // greedy: the chosen is the most likely
  EXPECT_GE(lp[0].top[0].second, lp[0].top[1].second);
  EXPECT_GE(lp[0].top[1].second, lp[0].top[2].second);
  EXPECT_EQ((*tokens)[1], 7);
  EXPECT_NEAR(lp[1].chosen, log_softmax(1, 7), 1e-5);  // before the bias
  EXPECT_TRUE(lp[1].top.empty());
}

TEST(PenaltyEdits, FollowOpenAisAndVllmsDefinitions) {
  PenaltyRule rule;
  rule.presence = 0.5f;
  rule.frequency = 0.25f;
  rule.repetition = 1.5f;
  rule.bias = {{9, 2.0f}, {4, -1.0f}};
  const std::map<int32_t, int32_t> counts = {{4, 3}, {5, 1}};
  const std::vector<LogitEdit> e = PenaltyEdits(rule, counts, {1, 5}, 10);
  ASSERT_EQ(e.size(), 4u);  // tokens 1, 4, 5, 9, each once, in order
  EXPECT_EQ(e[0].token, 1);  // prompt only: repetition, no offset
  EXPECT_EQ(e[0].repetition, 1.5f);
  EXPECT_EQ(e[0].offset, 0.0f);
  EXPECT_EQ(e[1].token, 4);  // bias, then 3 x frequency, then presence
  EXPECT_EQ(e[1].offset, -1.0f - 0.75f - 0.5f);
  EXPECT_EQ(e[1].repetition, 1.5f);
  EXPECT_EQ(e[2].token, 5);
  EXPECT_EQ(e[2].offset, -0.25f - 0.5f);
  EXPECT_EQ(e[3].token, 9);  // bias alone
  EXPECT_EQ(e[3].offset, 2.0f);
  EXPECT_EQ(e[3].repetition, 1.0f);
}

TEST(PenaltyEdits, MinTokensMasksUntilReached) {
  PenaltyRule rule;
  rule.min_tokens = 2;
  rule.masked = {0, 3};
  EXPECT_EQ(PenaltyEdits(rule, {}, {}, 1).size(), 2u);
  EXPECT_EQ(PenaltyEdits(rule, {}, {}, 1)[1].offset, -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(PenaltyEdits(rule, {}, {}, 2).empty());
  EXPECT_TRUE(PenaltyEdits(PenaltyRule{}, {{1, 2}}, {1}, 0).empty());  // no rule, no edit
}

}  // namespace
}  // namespace seam::runtime
