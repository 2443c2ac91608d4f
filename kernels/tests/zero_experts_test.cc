// The ops for a MoE with zero-computation experts (LongCat-Flash's) on the
// CPU: MoeRouteBiased against a direct per-row router written out here (the
// host routing LongCat-Flash ran before: the same fp32 operations in the
// same order, so bit for bit), the score-correction bias choosing while the
// unbiased scores weigh, the lower-index tie rule, its refusals; and
// IdentityExpertPairs (input rows or zeros in the identity experts' slots,
// other slots untouched).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::Ints;
using testing::RandomTensor;
using testing::Values;

// One row's choice: fp32 softmax (exp of the difference to the row's
// maximum, a sequential sum, a division), the top_k by score + bias (ties to
// the lower id), weights score × scaling.
void ReferenceRow(const float* l, int64_t experts, const std::vector<float>& bias, int64_t top_k, float scaling,
                  std::vector<int32_t>& ids, std::vector<float>& weights) {
  const float most = *std::max_element(l, l + experts);
  std::vector<float> score(experts), choice(experts);
  float sum = 0.0f;
  for (int64_t e = 0; e < experts; ++e) sum += (score[e] = std::exp(l[e] - most));
  for (int64_t e = 0; e < experts; ++e) choice[e] = (score[e] /= sum) + bias[e];
  std::vector<int32_t> order(experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return choice[a] > choice[b]; });
  for (int64_t k = 0; k < top_k; ++k) {
    ids.push_back(order[k]);
    weights.push_back(score[order[k]] * scaling);
  }
}

struct Routes {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routes Route(const Tensor& logits, const std::vector<float>& bias, int64_t top_k, float scaling) {
  const int64_t rows = logits.dim(0);
  const Tensor w = Tensor::Empty({rows, top_k}, DType::kF32), ids = Tensor::Empty({rows, top_k}, DType::kI32);
  const absl::Status s = MoeRouteBiased(logits, Tensor::FromFloats(bias, {logits.dim(1)}), top_k, scaling, w, ids);
  EXPECT_TRUE(s.ok()) << s;
  return {Ints(ids), std::vector<float>(w.data<float>(), w.data<float>() + rows * top_k)};
}

TEST(MoeRouteBiased, MatchesTheDirectRouterBitForBit) {
  // LongCat-Flash's proportions: 64 routed + 32 zero experts, top-12; and a small grid.
  for (const auto& [experts, top_k] : {std::pair<int64_t, int64_t>{96, 12}, {10, 2}, {5, 5}}) {
    constexpr int64_t kRows = 13;
    const Tensor logits = RandomTensor({kRows, experts}, DType::kF32, 31 + experts);
    const std::vector<double> b = Values(RandomTensor({experts}, DType::kF32, 7 + experts));
    std::vector<float> bias(b.begin(), b.end());
    for (float& v : bias) v *= 0.05f;  // a bias of the scores' size, so it changes choices
    const Routes got = Route(logits, bias, top_k, 6.0f);
    Routes want;
    for (int64_t r = 0; r < kRows; ++r) {
      ReferenceRow(logits.data<float>() + r * experts, experts, bias, top_k, 6.0f, want.ids, want.weights);
    }
    EXPECT_EQ(got.ids, want.ids) << experts << " experts";
    ASSERT_EQ(got.weights.size(), want.weights.size());
    EXPECT_EQ(std::memcmp(got.weights.data(), want.weights.data(), want.weights.size() * sizeof(float)), 0)
        << experts << " experts";
  }
}

TEST(MoeRouteBiased, TheBiasChoosesAndTheUnbiasedScoresWeigh) {
  // Experts 0..2 routed, 3..4 zero experts. Scores favour 0 and 1; the bias
  // lifts zero expert 4 above expert 1.
  const std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
  std::vector<double> p;
  double sum = 0.0;
  for (float v : l) sum += std::exp(double(v) - 2.0);
  for (float v : l) p.push_back(std::exp(double(v) - 2.0) / sum);
  ASSERT_LT(p[4], p[1]);
  ASSERT_GT(p[4] + 0.2, p[1]);
  const Routes got = Route(Tensor::FromFloats(l, {1, 5}), {0.0f, 0.0f, 0.0f, 0.0f, 0.2f}, 2, 2.5f);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{0, 4}));
  // fp32 exp and a five-term fp32 sum against double: a few ulps.
  EXPECT_NEAR(got.weights[0], p[0] * 2.5, 1e-6);
  EXPECT_NEAR(got.weights[1], p[4] * 2.5, 1e-6);  // unbiased, not renormalised
}

TEST(MoeRouteBiased, TiesGoToTheLowerIndexRowByRow) {
  const Routes got = Route(Tensor::FromFloats({0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f}, {2, 3}), {0.0f, 0.0f, 0.0f}, 2,
                           1.0f);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_FLOAT_EQ(got.weights[0], 1.0f / 3.0f);
  EXPECT_GT(got.weights[2], got.weights[3]);
}

TEST(MoeRouteBiased, RejectsBadArguments) {
  const Tensor logits = Tensor::Zeros({2, 8}, DType::kF32), bias = Tensor::Zeros({8}, DType::kF32);
  const Tensor w2 = Tensor::Empty({2, 2}, DType::kF32), ids2 = Tensor::Empty({2, 2}, DType::kI32);
  const auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(MoeRouteBiased(logits, bias, 9, 1.0f, w2, ids2)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MoeRouteBiased(logits, Tensor::Zeros({7}, DType::kF32), 2, 1.0f, w2, ids2)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MoeRouteBiased(logits, Tensor::Zeros({8}, DType::kBF16), 2, 1.0f, w2, ids2)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MoeRouteBiased(logits, bias, 2, 1.0f, Tensor::Empty({2, 3}, DType::kF32), ids2)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MoeRouteBiased(logits, bias, 2, 1.0f, w2, Tensor::Empty({2, 2}, DType::kF32))),
            absl::StatusCode::kInvalidArgument);
}

TEST(IdentityExpertPairs, FillsTheIdentityExpertsSlotsOnly) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor x = RandomTensor({3, 4}, dtype, 5);
    // Routes sorted by expert; experts 0..3 routed, 4 and 5 identity.
    const Tensor ids = Tensor::FromInts({0, 4, 1, 2, 3, 5}, {3, 2});
    for (bool copy : {true, false}) {
      Tensor out = Tensor::FromFloats(std::vector<float>(6 * 4, 7.0f), {6, 4}, dtype);
      const absl::Status s = IdentityExpertPairs(x, ids, 4, copy, out);
      ASSERT_TRUE(s.ok()) << s;
      const std::vector<double> got = Values(out), in = Values(x);
      for (int64_t p = 0; p < 6; ++p) {
        const bool identity = p == 1 || p == 5;
        for (int64_t c = 0; c < 4; ++c) {
          const double want = !identity ? 7.0 : copy ? in[(p / 2) * 4 + c] : 0.0;
          EXPECT_EQ(got[p * 4 + c], want) << "pair " << p << " column " << c << (copy ? " (copy)" : " (zeros)");
        }
      }
    }
  }
}

TEST(IdentityExpertPairs, RejectsBadArguments) {
  const Tensor x = Tensor::Zeros({3, 4}, DType::kF32), ids = Tensor::FromInts({0, 4, 1, 2, 3, 5}, {3, 2});
  const Tensor out = Tensor::Empty({6, 4}, DType::kF32);
  EXPECT_EQ(IdentityExpertPairs(x, ids, -1, true, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IdentityExpertPairs(x, ids, 4, true, Tensor::Empty({6, 4}, DType::kBF16)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IdentityExpertPairs(x, ids, 4, true, Tensor::Empty({5, 4}, DType::kF32)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IdentityExpertPairs(x, Tensor::FromInts({0, 1, 2, 3}, {2, 2}), 4, true, out).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::kernels
