// SiluAndMul and AddInPlace against double-precision loops, for f32 and bf16
// storage, with mixed dtypes where the contract allows them.
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

class ActivationTest : public ::testing::TestWithParam<DType> {};

TEST_P(ActivationTest, SiluAndMulGatesTheUpHalfWithSiluOfTheGateHalf) {
  const DType dtype = GetParam();
  const int64_t rows = 7, inter = 48;
  const Tensor input = RandomTensor({rows, 2 * inter}, dtype, 31);
  const Tensor out = Tensor::Empty({rows, inter}, dtype);
  ASSERT_TRUE(SiluAndMul(input, out).ok());
  const std::vector<double> in = Values(input);
  std::vector<double> want(rows * inter);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = in[r * 2 * inter + i], u = in[r * 2 * inter + inter + i];
      want[r * inter + i] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  // exp, one division and two products in fp32: a few fp32 ulps, 1e-6
  // relative; a bf16 output adds half a bf16 ulp.
  ExpectAllClose(out, want, 1e-6 + HalfUlp(dtype), "out");
}

TEST_P(ActivationTest, AddInPlaceAddsInFp32AndRoundsOnceIntoDst) {
  const DType dtype = GetParam();
  const Tensor dst = RandomTensor({7, 96}, dtype, 32);
  const Tensor src = RandomTensor({7, 96}, DType::kF32, 33);
  std::vector<double> want = Values(dst);
  const std::vector<double> s = Values(src);
  for (size_t i = 0; i < want.size(); ++i) want[i] += s[i];
  ASSERT_TRUE(AddInPlace(dst, src).ok());
  // One fp32 add then one rounding to dst's dtype: half an fp32 ulp plus
  // half an ulp of dst's dtype.
  ExpectAllClose(dst, want, HalfUlp(DType::kF32) + HalfUlp(dtype), "dst");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ActivationTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

TEST(AddInPlace, WorksOnOneDimensionalTensorsLongerThanAChunk) {
  const Tensor dst = RandomTensor({5000}, DType::kF32, 34);
  const Tensor src = RandomTensor({5000}, DType::kBF16, 35);
  const std::vector<float> d = dst.ToFloats(), s = src.ToFloats();
  std::vector<float> want(d.size());
  for (size_t i = 0; i < d.size(); ++i) want[i] = d[i] + s[i];
  ASSERT_TRUE(AddInPlace(dst, src).ok());
  EXPECT_EQ(dst.ToFloats(), want);  // the same single fp32 add: bitwise equal
}

TEST(ActivationEmpty, ZeroRowsAreAccepted) {
  EXPECT_TRUE(SiluAndMul(Tensor::Empty({0, 96}, DType::kBF16), Tensor::Empty({0, 48}, DType::kBF16)).ok());
  EXPECT_TRUE(AddInPlace(Tensor::Empty({0, 96}, DType::kF32), Tensor::Empty({0, 96}, DType::kBF16)).ok());
}

}  // namespace
}  // namespace seam::kernels
