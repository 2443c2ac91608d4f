// HeadMatmul against a double-precision loop, on contiguous and strided
// (column-block) views, bit for bit against Matmul on each head's slice, and
// its refusals.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/kernels/head_matmul.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HalfUlp;
using testing::RandomTensor;
using testing::Values;

// out[t, h, n] = Σ_k x[t, h, k] · w[h, n, k] in double, row-major [T, H, N].
std::vector<double> ReferenceHeadMatmul(const Tensor& x, const Tensor& w) {
  const int64_t t = x.dim(0), heads = x.dim(1), k = x.dim(2), n = w.dim(1);
  const std::vector<double> xv = Values(x), wv = Values(w);
  std::vector<double> out(t * heads * n, 0.0);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t c = 0; c < n; ++c) {
        double acc = 0.0;
        for (int64_t i = 0; i < k; ++i) acc += xv[(r * heads + h) * k + i] * wv[(h * n + c) * k + i];
        out[(r * heads + h) * n + c] = acc;
      }
    }
  }
  return out;
}

// [T, H, inner] as the first `inner` columns of each head's `wide`-column block.
Tensor HeadBlockView(int64_t t, int64_t heads, int64_t inner, int64_t wide, DType dtype) {
  const Tensor base = RandomTensor({t, heads * wide}, dtype, 99);
  return base.Reshape({t, heads, wide}).value().Narrow(2, 0, inner);
}

class HeadMatmulTest : public ::testing::TestWithParam<DType> {};

// fp32 accumulation over K terms vs double: 1e-5 relative to the output's
// scale; a bf16 output adds half a bf16 ulp for its one rounding.
TEST_P(HeadMatmulTest, MatchesDoubleReference) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({7, 5, 96}, dtype, 1);
  const Tensor w = RandomTensor({5, 33, 96}, dtype, 2);
  const Tensor out = Tensor::Empty({7, 5, 33}, dtype);
  ASSERT_TRUE(HeadMatmul(x, w, out).ok());
  ExpectAllClose(out, ReferenceHeadMatmul(x, w), 1e-5 + HalfUlp(dtype), "out");
}

TEST_P(HeadMatmulTest, StridedViewsMatchAndLeaveOtherColumnsAlone) {
  const DType dtype = GetParam();
  const Tensor x_wide = RandomTensor({6, 4 * 80}, dtype, 3);
  const Tensor x = x_wide.Reshape({6, 4, 80}).value().Narrow(2, 16, 64);
  const Tensor w = RandomTensor({4, 24, 64}, dtype, 4);
  const Tensor out_wide = RandomTensor({6, 4 * 30}, dtype, 5);
  const std::vector<float> before = out_wide.ToFloats();
  const Tensor out = out_wide.Reshape({6, 4, 30}).value().Narrow(2, 0, 24);
  ASSERT_TRUE(HeadMatmul(x, w, out).ok());
  ExpectAllClose(out, ReferenceHeadMatmul(x.Clone(), w), 1e-5 + HalfUlp(dtype), "out");
  const std::vector<float> after = out_wide.ToFloats();
  for (int64_t i = 0; i < static_cast<int64_t>(after.size()); ++i) {
    if (i % 30 >= 24) {
      EXPECT_EQ(after[i], before[i]) << "column outside out at " << i;
    }
  }
}

// The same arithmetic as Matmul on a contiguous copy of each head's slice, so
// a model that moves from per-head Matmul calls keeps its bits.
TEST_P(HeadMatmulTest, MatchesMatmulPerHeadBitForBit) {
  const DType dtype = GetParam();
  const int64_t t = 3, heads = 4, k = 64, n = 40;
  const Tensor x = HeadBlockView(t, heads, k, k + 8, dtype);
  const Tensor w = RandomTensor({heads, n, k}, dtype, 6);
  const Tensor out = Tensor::Empty({t, heads, n}, dtype);
  ASSERT_TRUE(HeadMatmul(x, w, out).ok());
  for (int64_t h = 0; h < heads; ++h) {
    const Tensor xh = x.Narrow(1, h, 1).Clone().Reshape({t, k}).value();
    const Tensor wh = w.Narrow(0, h, 1).Reshape({n, k}).value();
    const Tensor want = Tensor::Empty({t, n}, dtype);
    ASSERT_TRUE(Matmul(xh, wh, want).ok());
    EXPECT_EQ(out.Narrow(1, h, 1).Clone().ToFloats(), want.ToFloats()) << "head " << h;
  }
}

TEST_P(HeadMatmulTest, EmptySumWritesZerosAndEmptyShapesAreNoOps) {
  const DType dtype = GetParam();
  const Tensor out = RandomTensor({2, 3, 5}, dtype, 7);
  ASSERT_TRUE(HeadMatmul(Tensor::Empty({2, 3, 0}, dtype), Tensor::Empty({3, 5, 0}, dtype), out).ok());
  for (float v : out.ToFloats()) EXPECT_EQ(v, 0.0f);
  EXPECT_TRUE(HeadMatmul(Tensor::Empty({0, 3, 4}, dtype), Tensor::Empty({3, 5, 4}, dtype),
                         Tensor::Empty({0, 3, 5}, dtype))
                  .ok());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HeadMatmulTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

TEST(HeadMatmulRefusals, NamesTheArgument) {
  const Tensor x = Tensor::Empty({2, 3, 4}, DType::kF32);
  const Tensor w = Tensor::Empty({3, 5, 4}, DType::kF32);
  const Tensor out = Tensor::Empty({2, 3, 5}, DType::kF32);
  const absl::Status f16 = HeadMatmul(Tensor::Empty({2, 3, 4}, DType::kF16), w, out);
  EXPECT_EQ(f16.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(f16.message()).find("x dtype f16"), std::string::npos) << f16;
  EXPECT_EQ(HeadMatmul(x, Tensor::Empty({3, 5, 4}, DType::kBF16), out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HeadMatmul(x, Tensor::Empty({2, 5, 4}, DType::kF32), out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HeadMatmul(x, w, Tensor::Empty({2, 3, 6}, DType::kF32)).code(), absl::StatusCode::kInvalidArgument);
  // A column block of a wider matrix is a valid out.
  const absl::Status block = HeadMatmul(x, w, Tensor::Empty({2, 3, 7}, DType::kF32).Narrow(2, 0, 5));
  EXPECT_TRUE(block.ok()) << block;
}

}  // namespace
}  // namespace seam::kernels
