// MoeRoute, GatherRows and ScatterAddRows on the CPU: routing against a direct
// double-precision softmax + top-k, the lower-index tie rule, row movement,
// and the argument checks (out-of-range and repeated rows, shapes, dtypes).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::Ints;
using testing::RandomTensor;
using testing::Values;

class MoeRouteTest : public ::testing::TestWithParam<DType> {};

TEST_P(MoeRouteTest, MatchesDoubleReference) {
  const DType dtype = GetParam();
  constexpr int64_t kRows = 9, kExperts = 60, kTopK = 4;
  const Tensor logits = RandomTensor({kRows, kExperts}, dtype, 17);
  const std::vector<double> x = Values(logits);
  for (bool renormalize : {false, true}) {
    const Tensor weights = Tensor::Empty({kRows, kTopK}, DType::kF32);
    const Tensor ids = Tensor::Empty({kRows, kTopK}, DType::kI32);
    ASSERT_TRUE(MoeRoute(logits, kTopK, renormalize, weights, ids).ok());
    const std::vector<double> got_w = Values(weights);
    const std::vector<int32_t> got_ids = Ints(ids);
    for (int64_t r = 0; r < kRows; ++r) {
      const double* row = x.data() + r * kExperts;
      const double mx = *std::max_element(row, row + kExperts);
      std::vector<double> p(kExperts);
      double sum = 0.0;
      for (int64_t e = 0; e < kExperts; ++e) sum += (p[e] = std::exp(row[e] - mx));
      for (double& v : p) v /= sum;
      std::vector<int32_t> order(kExperts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&p](int32_t a, int32_t b) { return p[a] > p[b]; });
      double kept = 0.0;
      for (int64_t j = 0; j < kTopK; ++j) kept += p[order[j]];
      for (int64_t j = 0; j < kTopK; ++j) {
        // RandomTensor's values are distinct enough that fp32 and double agree on the order.
        EXPECT_EQ(got_ids[r * kTopK + j], order[j]) << "row " << r << " rank " << j;
        const double want = renormalize ? p[order[j]] / kept : p[order[j]];
        // fp32 exp and a 60-term fp32 sum: a few ulps.
        EXPECT_NEAR(got_w[r * kTopK + j], want, 1e-6 * want) << "row " << r << " rank " << j;
      }
      if (renormalize) {
        double total = 0.0;
        for (int64_t j = 0; j < kTopK; ++j) total += got_w[r * kTopK + j];
        EXPECT_NEAR(total, 1.0, 1e-6);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MoeRouteTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

TEST(MoeRouteTieTest, EqualLogitsGoToLowerIndex) {
  const Tensor logits = Tensor::FromFloats({0.f, 2.f, 1.f, 2.f, 2.f, 0.f, 1.f, 0.f}, {1, 8});
  const Tensor weights = Tensor::Empty({1, 4}, DType::kF32);
  const Tensor ids = Tensor::Empty({1, 4}, DType::kI32);
  ASSERT_TRUE(MoeRoute(logits, 4, true, weights, ids).ok());
  EXPECT_EQ(Ints(ids), (std::vector<int32_t>{1, 3, 4, 2}));
  const std::vector<double> w = Values(weights);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
  EXPECT_NEAR(w[0] / w[3], std::exp(1.0), 1e-6);
}

TEST(MoeRouteTieTest, TopKOfAllExpertsIsTheFullSoftmax) {
  const Tensor logits = Tensor::FromFloats({0.5f, -1.f, 3.f}, {1, 3});
  const Tensor weights = Tensor::Empty({1, 3}, DType::kF32);
  const Tensor ids = Tensor::Empty({1, 3}, DType::kI32);
  ASSERT_TRUE(MoeRoute(logits, 3, false, weights, ids).ok());
  EXPECT_EQ(Ints(ids), (std::vector<int32_t>{2, 0, 1}));
  const std::vector<double> w = Values(weights);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-6);
}

TEST(MoeRouteValidationTest, RejectsBadArguments) {
  const Tensor logits = Tensor::Zeros({2, 8}, DType::kF32);
  const Tensor w2 = Tensor::Empty({2, 2}, DType::kF32);
  const Tensor ids2 = Tensor::Empty({2, 2}, DType::kI32);
  EXPECT_EQ(MoeRoute(logits, 0, true, Tensor::Empty({2, 0}, DType::kF32), Tensor::Empty({2, 0}, DType::kI32)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MoeRoute(logits, 9, true, w2, ids2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MoeRoute(logits, 2, true, Tensor::Empty({2, 2}, DType::kBF16), ids2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MoeRoute(logits, 2, true, Tensor::Empty({2, 3}, DType::kF32), ids2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MoeRoute(logits, 2, true, w2, Tensor::Empty({2, 2}, DType::kF32)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MoeRoute(Tensor::Zeros({8}, DType::kF32), 2, true, w2, ids2).code(), absl::StatusCode::kInvalidArgument);
}

class RowMoveTest : public ::testing::TestWithParam<DType> {};

TEST_P(RowMoveTest, GatherRowsCopiesRows) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({6, 5}, dtype, 23);
  const Tensor rows = Tensor::FromInts({4, 0, 4, 5}, {4});
  const Tensor out = Tensor::Empty({4, 5}, dtype);
  ASSERT_TRUE(GatherRows(x, rows, out).ok());
  const std::vector<double> xv = Values(x), ov = Values(out);
  const int32_t r[] = {4, 0, 4, 5};
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(ov[i * 5 + c], xv[r[i] * 5 + c]) << i << "," << c;
  }
}

TEST_P(RowMoveTest, ScatterAddRowsAddsWeightedRows) {
  const DType dtype = GetParam();
  const Tensor dst = RandomTensor({5, 3}, dtype, 29);
  const std::vector<double> before = Values(dst);
  const Tensor src = RandomTensor({2, 3}, DType::kF32, 31);
  const Tensor rows = Tensor::FromInts({3, 1}, {2});
  const Tensor weights = Tensor::FromFloats({0.5f, -2.0f}, {2});
  ASSERT_TRUE(ScatterAddRows(dst, src, rows, weights).ok());
  const std::vector<double> after = Values(dst), s = Values(src);
  const double rel = dtype == DType::kF32 ? 1e-6 : testing::HalfUlp(dtype) * 1.01;
  for (int c = 0; c < 3; ++c) {
    for (int r : {0, 2, 4}) EXPECT_EQ(after[r * 3 + c], before[r * 3 + c]) << "untouched row " << r;
    const double want3 = before[3 * 3 + c] + 0.5 * s[c];
    const double want1 = before[1 * 3 + c] - 2.0 * s[3 + c];
    EXPECT_NEAR(after[3 * 3 + c], want3, rel * std::fabs(want3) + 1e-7);
    EXPECT_NEAR(after[1 * 3 + c], want1, rel * std::fabs(want1) + 1e-7);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RowMoveTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

TEST(RowMoveValidationTest, GatherRowsRejectsOutOfRangeRowsAndBadShapes) {
  const Tensor x = Tensor::Zeros({4, 3}, DType::kF32);
  const Tensor out = Tensor::Empty({2, 3}, DType::kF32);
  EXPECT_EQ(GatherRows(x, Tensor::FromInts({0, 4}, {2}), out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(x, Tensor::FromInts({-1, 0}, {2}), out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(x, Tensor::FromInts({0, 1}, {2}), Tensor::Empty({2, 4}, DType::kF32)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(x, Tensor::FromInts({0, 1}, {2}), Tensor::Empty({2, 3}, DType::kBF16)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(x, Tensor::FromFloats({0.f, 1.f}, {2}), out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(GatherRows(x, Tensor::FromInts({0, 3}, {2}), out).ok());
}

TEST(RowMoveValidationTest, ScatterAddRowsRejectsBadRowsAndShapes) {
  const Tensor dst = Tensor::Zeros({4, 3}, DType::kF32);
  const Tensor src = Tensor::Zeros({2, 3}, DType::kF32);
  const Tensor weights = Tensor::FromFloats({1.f, 1.f}, {2});
  EXPECT_EQ(ScatterAddRows(dst, src, Tensor::FromInts({0, 4}, {2}), weights).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScatterAddRows(dst, src, Tensor::FromInts({-1, 0}, {2}), weights).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScatterAddRows(dst, src, Tensor::FromInts({2, 2}, {2}), weights).code(),
            absl::StatusCode::kInvalidArgument);  // repeated row
  EXPECT_EQ(ScatterAddRows(dst, Tensor::Zeros({2, 4}, DType::kF32), Tensor::FromInts({0, 1}, {2}), weights).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScatterAddRows(dst, src, Tensor::FromInts({0, 1}, {2}), Tensor::FromFloats({1.f, 1.f}, {2}, DType::kBF16))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScatterAddRows(dst, src, Tensor::FromInts({0, 1}, {2}), Tensor::FromFloats({1.f}, {1})).code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing was added by the rejected calls.
  for (double v : Values(dst)) EXPECT_EQ(v, 0.0);
}

}  // namespace
}  // namespace seam::kernels
