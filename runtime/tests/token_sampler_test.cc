// Token choice on the logits' device: greedy rows by one Argmax, sampled rows
// with their own parameters, the same tokens as a row-by-row kernels::Sample
// on the host (and, on a GPU, the same as the host's).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace seam::runtime
