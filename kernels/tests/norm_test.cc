// RmsNorm and FusedAddRmsNorm against double-precision loops: the residual is
// the once-rounded fp32 sum, and the norm is taken of the unrounded sum.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HalfUlp;
using testing::RandomTensor;
using testing::Values;

constexpr float kEps = 1e-6f;

// out = x / sqrt(mean(x²) + eps) · w per row of x ([rows, h] flattened).
std::vector<double> ReferenceRmsNorm(const std::vector<double>& x, const std::vector<double>& w, int64_t h) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r * h < x.size(); ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < h; ++i) ss += x[r * h + i] * x[r * h + i];
    const double inv = 1.0 / std::sqrt(ss / h + kEps);
    for (int64_t i = 0; i < h; ++i) out[r * h + i] = x[r * h + i] * inv * w[i];
  }
  return out;
}

class NormTest : public ::testing::TestWithParam<DType> {};

TEST_P(NormTest, RmsNormMatchesDoubleReference) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({7, 96}, dtype, 11);
  const Tensor w = RandomTensor({96}, dtype, 12);
  const Tensor out = Tensor::Empty({7, 96}, dtype);
  ASSERT_TRUE(RmsNorm(x, w, kEps, out).ok());
  // A 96-term fp32 mean of squares and one rsqrt: 1e-5 relative; a bf16
  // output adds half a bf16 ulp.
  ExpectAllClose(out, ReferenceRmsNorm(Values(x), Values(w), 96), 1e-5 + HalfUlp(dtype), "out");
}

TEST_P(NormTest, FusedAddRmsNormMatchesDoubleReference) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({7, 96}, dtype, 13);
  const Tensor residual = RandomTensor({7, 96}, dtype, 14);
  const Tensor w = RandomTensor({96}, dtype, 15);
  const Tensor out = Tensor::Empty({7, 96}, dtype);
  std::vector<double> sum = Values(x);
  const std::vector<double> r = Values(residual);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += r[i];
  ASSERT_TRUE(FusedAddRmsNorm(x, residual, w, kEps, out).ok());
  // The residual is one rounding of the sum: within half an ulp of dtype.
  ExpectAllClose(residual, sum, HalfUlp(dtype), "residual");
  ExpectAllClose(out, ReferenceRmsNorm(sum, Values(w), 96), 1e-5 + HalfUlp(dtype), "out");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormTest, ::testing::Values(DType::kF32, DType::kBF16), testing::DTypeParamName);

TEST(FusedAddRmsNorm, RoundsResidualOnceAndNormsTheFp32Sum) {
  // f32 x + bf16 residual: the fp32 sum is not a bf16 value. The residual must
  // be that sum rounded once to bf16, and `out` the norm of the unrounded sum;
  // the norm of the rounded residual would be off by up to 2^-9, far past 1e-5.
  const Tensor x = RandomTensor({7, 96}, DType::kF32, 16);
  const Tensor residual = RandomTensor({7, 96}, DType::kBF16, 17);
  const Tensor w = RandomTensor({96}, DType::kF32, 18);
  const Tensor out = Tensor::Empty({7, 96}, DType::kF32);
  const std::vector<float> xf = x.ToFloats(), rf = residual.ToFloats();
  std::vector<double> sum(xf.size());
  std::vector<float> rounded(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) {
    const float s = xf[i] + rf[i];
    sum[i] = s;
    rounded[i] = BF16ToFloat(FloatToBF16(s));
  }
  ASSERT_TRUE(FusedAddRmsNorm(x, residual, w, kEps, out).ok());
  EXPECT_EQ(residual.ToFloats(), rounded);
  ExpectAllClose(out, ReferenceRmsNorm(sum, Values(w), 96), 1e-5, "out");
}

TEST(FusedAddRmsNorm, OutputMayAliasX) {
  const Tensor x = RandomTensor({5, 80}, DType::kBF16, 19);
  const Tensor residual = RandomTensor({5, 80}, DType::kBF16, 20);
  const Tensor w = RandomTensor({80}, DType::kBF16, 21);
  const Tensor x_copy = x.Clone(), residual_copy = residual.Clone();
  const Tensor separate = Tensor::Empty({5, 80}, DType::kBF16);
  ASSERT_TRUE(FusedAddRmsNorm(x_copy, residual_copy, w, kEps, separate).ok());
  ASSERT_TRUE(FusedAddRmsNorm(x, residual, w, kEps, x).ok());
  EXPECT_EQ(x.ToFloats(), separate.ToFloats());
  EXPECT_EQ(residual.ToFloats(), residual_copy.ToFloats());
}

TEST(NormEmpty, ZeroRowsAreAccepted) {
  const Tensor x = Tensor::Empty({0, 96}, DType::kBF16);
  const Tensor w = RandomTensor({96}, DType::kBF16, 22);
  EXPECT_TRUE(RmsNorm(x, w, kEps, x).ok());
  EXPECT_TRUE(FusedAddRmsNorm(x, Tensor::Empty({0, 96}, DType::kBF16), w, kEps, x).ok());
}

// The fused finalize equals the unfused steps: Σ_k s_k · e_k in fp32, then
// the fused add + norm, bit for bit on f32.
TEST(MoeFinalizeAddRmsNorm, EqualsFinalizeThenFusedAddRmsNorm) {
  const int64_t rows = 5, k = 2, h = 96;
  const Tensor e = RandomTensor({rows, k, h}, DType::kF32, 31);
  const Tensor scales = RandomTensor({rows, k}, DType::kF32, 32);
  const Tensor w = RandomTensor({h}, DType::kF32, 33);
  const Tensor res = RandomTensor({rows, h}, DType::kF32, 34);
  const Tensor res2 = res.Clone();
  std::vector<float> f(rows * h, 0.0f);
  const float* ev = e.data<float>();
  const float* sv = scales.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < h; ++i) f[r * h + i] += sv[r * k + j] * ev[(r * k + j) * h + i];
  const Tensor fin = Tensor::FromFloats(f, {rows, h});
  const Tensor out = Tensor::Empty({rows, h}, DType::kF32), out2 = Tensor::Empty({rows, h}, DType::kF32);
  ASSERT_TRUE(MoeFinalizeAddRmsNorm(e, scales, res, w, kEps, out).ok());
  ASSERT_TRUE(FusedAddRmsNorm(fin, res2, w, kEps, out2).ok());
  EXPECT_EQ(out.ToFloats(), out2.ToFloats());
  EXPECT_EQ(res.ToFloats(), res2.ToFloats());
  const absl::Status bad = MoeFinalizeAddRmsNorm(e, Tensor::Empty({rows, k}, DType::kBF16), res, w, kEps, out);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::kernels
