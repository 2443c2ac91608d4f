// The logit ops around a token choice on the CPU: EditLogits's arithmetic
// and order (repetition, then offset; -inf masks), pairs outside the logits
// skipped, TokenLogProbs against a double-precision log-softmax, and a
// sequence's draw that does not depend on its row in the batch.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::Ints;
using testing::RandomTensor;
using testing::Values;

TEST(EditLogits, DividesPositiveMultipliesNegativeThenAddsTheOffset) {
  Tensor logits = Tensor::FromFloats({2.0f, -2.0f, 3.0f, 0.5f, 1.0f, -1.0f}, {2, 3});
  const Tensor at = Tensor::FromInts({0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2}, {6, 2});
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor by = Tensor::FromFloats({2.0f, 0.0f, 2.0f, 0.0f, 1.0f, -0.5f, 1.5f, 1.0f, 1.0f, -inf, 4.0f, 0.25f},
                                       {6, 2});
  ASSERT_TRUE(EditLogits(logits, at, by).ok());
  const std::vector<float> v = logits.ToFloats();
  EXPECT_EQ(v[0], 1.0f);             // 2 / 2
  EXPECT_EQ(v[1], -4.0f);            // -2 * 2
  EXPECT_EQ(v[2], 2.5f);             // no repetition, 3 - 0.5
  EXPECT_EQ(v[3], 0.5f / 1.5f + 1);  // a positive logit divided, then the offset
  EXPECT_EQ(v[4], -inf);             // masked
  EXPECT_EQ(v[5], -3.75f);           // -1 * 4 + 0.25
}

TEST(EditLogits, PairsOutsideTheLogitsAreSkipped) {
  Tensor logits = Tensor::FromFloats({1.0f, 2.0f}, {1, 2});
  const Tensor at = Tensor::FromInts({1, 0, 0, 2, -1, 0, 0, -5}, {4, 2});
  const Tensor by = Tensor::FromFloats({1.0f, 9.0f, 1.0f, 9.0f, 1.0f, 9.0f, 1.0f, 9.0f}, {4, 2});
  ASSERT_TRUE(EditLogits(logits, at, by).ok());
  EXPECT_EQ(logits.ToFloats(), (std::vector<float>{1.0f, 2.0f}));
}

TEST(EditLogits, ShapesAreCheckedByName) {
  Tensor logits = Tensor::Zeros({1, 4}, DType::kF32);
  const absl::Status wide = EditLogits(logits, Tensor::FromInts({0, 0, 0}, {1, 3}), Tensor::Zeros({1, 3}, DType::kF32));
  EXPECT_EQ(wide.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wide.message(), "at: expected [edits, 2], got [1, 3]");
  const absl::Status bf16 = EditLogits(Tensor::Zeros({1, 4}, DType::kBF16), Tensor::FromInts({0, 0}, {1, 2}),
                                       Tensor::Zeros({1, 2}, DType::kF32));
  EXPECT_EQ(bf16.code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenLogProbs, MatchesADoubleLogSoftmax) {
  const Tensor logits = RandomTensor({3, 500}, DType::kF32, 91);
  const Tensor tokens = Tensor::FromInts({0, 499, 7, 1, 2, 3, 250, 250, 100}, {3, 3});
  const Tensor out = Tensor::Empty({3, 3}, DType::kF32);
  ASSERT_TRUE(TokenLogProbs(logits, tokens, out).ok());
  const std::vector<double> lv = Values(logits);
  const std::vector<int32_t> tv = Ints(tokens);
  const std::vector<float> got = out.ToFloats();
  for (int r = 0; r < 3; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < 500; ++j) mx = std::max(mx, lv[r * 500 + j]);
    for (int j = 0; j < 500; ++j) sum += std::exp(lv[r * 500 + j] - mx);
    for (int k = 0; k < 3; ++k) {
      const double want = lv[r * 500 + tv[r * 3 + k]] - mx - std::log(sum);
      EXPECT_NEAR(got[r * 3 + k], want, 1e-5) << "row " << r << " token " << tv[r * 3 + k];
    }
  }
}

TEST(TokenLogProbs, ATokenOutsideTheRowIsNaN) {
  const Tensor out = Tensor::Empty({1, 2}, DType::kF32);
  ASSERT_TRUE(TokenLogProbs(Tensor::FromFloats({0.0f, 0.0f}, {1, 2}), Tensor::FromInts({1, 2}, {1, 2}), out).ok());
  EXPECT_NEAR(out.ToFloats()[0], -std::log(2.0f), 1e-7);
  EXPECT_TRUE(std::isnan(out.ToFloats()[1]));
}

TEST(Sample, ASequenceDrawsTheSameTokenInAnyRowOfABatch) {
  // One sequence's logits row, alone and as row 3 of a batch of others: with
  // its seed and step it draws the same token, as a seeded request must.
  const Tensor batch = RandomTensor({5, 96}, DType::kF32, 92);
  const SamplingParams p{1.0f, 0, 1.0f, 4242};
  for (int32_t step = 0; step < 20; ++step) {
    const Tensor out = Tensor::Empty({5}, DType::kI32);
    SEAM_CHECK_OK(Sample(batch, p, Tensor::FromInts(std::vector<int32_t>(5, step), {5}), out));
    const Tensor alone = Tensor::Empty({1}, DType::kI32);
    SEAM_CHECK_OK(Sample(batch.Rows(3, 1).Clone(), p, Tensor::FromInts({step}, {1}), alone));
    EXPECT_EQ(Ints(out)[3], Ints(alone)[0]) << "step " << step;
  }
}

}  // namespace
}  // namespace seam::kernels
