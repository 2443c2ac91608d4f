// Softmax, Argmax and TopK: fp32 softmax against a double loop, and the
// deterministic tie rules (lowest index first) of Argmax and TopK.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HalfUlp;
using testing::Ints;
using testing::RandomTensor;
using testing::Values;

class SoftmaxTest : public ::testing::TestWithParam<DType> {};

TEST_P(SoftmaxTest, MatchesDoubleReference) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({7, 96}, dtype, 91);
  const Tensor out = Tensor::Empty({7, 96}, dtype);
  ASSERT_TRUE(Softmax(x, out).ok());
  const std::vector<double> xv = Values(x);
  std::vector<double> want(xv.size());
  for (int r = 0; r < 7; ++r) {
    const double m = *std::max_element(xv.begin() + r * 96, xv.begin() + (r + 1) * 96);
    double sum = 0.0;
    for (int i = 0; i < 96; ++i) sum += (want[r * 96 + i] = std::exp(xv[r * 96 + i] - m));
    for (int i = 0; i < 96; ++i) want[r * 96 + i] /= sum;
  }
  // fp32 exp and a 96-term fp32 sum: 1e-6 relative; bf16 output adds half an ulp.
  ExpectAllClose(out, want, 1e-6 + HalfUlp(dtype), "out");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SoftmaxTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

TEST(Softmax, LargeLogitsDoNotOverflow) {
  const Tensor x = Tensor::FromFloats({1000.0f, 1000.0f, -1000.0f}, {1, 3});
  const Tensor out = Tensor::Empty({1, 3}, DType::kF32);
  ASSERT_TRUE(Softmax(x, out).ok());
  EXPECT_EQ(out.ToFloats(), (std::vector<float>{0.5f, 0.5f, 0.0f}));
}

TEST(Argmax, TakesTheLowestIndexOnTies) {
  const Tensor logits = Tensor::FromFloats({1, 3, 3, 2, /**/ -1, -1, -1, -1, /**/ 0, 0, 5, 5}, {3, 4}, DType::kBF16);
  const Tensor out = Tensor::Empty({3}, DType::kI32);
  ASSERT_TRUE(Argmax(logits, out).ok());
  EXPECT_EQ(Ints(out), (std::vector<int32_t>{1, 0, 2}));
}

TEST(TopK, IsDescendingWithTiesGoingToTheLowerIndex) {
  const Tensor x = Tensor::FromFloats({2, 7, 2, 7, 1, 7}, {1, 6});
  const Tensor values = Tensor::Empty({1, 4}, DType::kF32);
  const Tensor indices = Tensor::Empty({1, 4}, DType::kI32);
  ASSERT_TRUE(TopK(x, 4, values, indices).ok());
  EXPECT_EQ(values.ToFloats(), (std::vector<float>{7, 7, 7, 2}));
  EXPECT_EQ(Ints(indices), (std::vector<int32_t>{1, 3, 5, 0}));
}

TEST(TopK, MatchesAStableSortOfEachRow) {
  const Tensor x = RandomTensor({7, 96}, DType::kBF16, 92);  // bf16 values: ties happen
  const Tensor values = Tensor::Empty({7, 13}, DType::kF32);
  const Tensor indices = Tensor::Empty({7, 13}, DType::kI32);
  ASSERT_TRUE(TopK(x, 13, values, indices).ok());
  const std::vector<float> xv = x.ToFloats(), got_v = values.ToFloats();
  const std::vector<int32_t> got_i = Ints(indices);
  for (int r = 0; r < 7; ++r) {
    std::vector<int32_t> order(96);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return xv[r * 96 + a] > xv[r * 96 + b]; });
    for (int j = 0; j < 13; ++j) {
      EXPECT_EQ(got_i[r * 13 + j], order[j]) << "row " << r << " rank " << j;
      EXPECT_EQ(got_v[r * 13 + j], xv[r * 96 + order[j]]) << "row " << r << " rank " << j;  // a copy: exact
    }
  }
}

TEST(TopKAndArgmax, ZeroRowsAreAccepted) {
  const Tensor x = Tensor::Empty({0, 96}, DType::kF32);
  EXPECT_TRUE(TopK(x, 5, Tensor::Empty({0, 5}, DType::kF32), Tensor::Empty({0, 5}, DType::kI32)).ok());
  EXPECT_TRUE(Argmax(x, Tensor::Empty({0}, DType::kI32)).ok());
  EXPECT_TRUE(Softmax(x, x).ok());
}

}  // namespace
}  // namespace seam::kernels
