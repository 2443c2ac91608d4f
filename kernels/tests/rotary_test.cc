// RotaryEmbedding against a rotate_half reference: full and partial rotary
// dims, GQA-shaped q and k, f32 and bf16 storage; features past rotary_dim
// stay untouched and position 0 is the identity.
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

constexpr float kTheta = 1000000.0f;

// The angle is part of the contract in fp32, as Hugging Face computes it:
// inv_freq = 1 / theta^(float(2i) / dim) and angle = float(pos) · inv_freq.
// The rotation itself is then done in double.
std::vector<double> ReferenceRotary(const Tensor& x, const std::vector<int32_t>& pos, int64_t rotary_dim) {
  const int64_t heads = x.dim(1), d = x.dim(2), half = rotary_dim / 2;
  std::vector<double> v = Values(x);
  for (int64_t t = 0; t < x.dim(0); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float inv_freq = 1.0f / std::pow(kTheta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
      const double angle = static_cast<float>(pos[t]) * inv_freq;
      for (int64_t h = 0; h < heads; ++h) {
        double* row = &v[(t * heads + h) * d];
        const double x1 = row[i], x2 = row[i + half];
        row[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
        row[i + half] = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
    }
  }
  return v;
}

struct RotaryCase {
  DType dtype;
  int64_t head_dim, rotary_dim;
};

void PrintTo(const RotaryCase& c, std::ostream* os) {
  *os << DTypeName(c.dtype) << " head_dim " << c.head_dim << " rotary_dim " << c.rotary_dim;
}

class RotaryTest : public ::testing::TestWithParam<RotaryCase> {};

TEST_P(RotaryTest, RotatesHalvesByPositionAngles) {
  const RotaryCase c = GetParam();
  const std::vector<int32_t> pos = {0, 1, 5, 17, 63, 1000, 4095};
  const Tensor q = RandomTensor({7, 6, c.head_dim}, c.dtype, 51);
  const Tensor k = RandomTensor({7, 2, c.head_dim}, c.dtype, 52);
  const std::vector<double> want_q = ReferenceRotary(q, pos, c.rotary_dim);
  const std::vector<double> want_k = ReferenceRotary(k, pos, c.rotary_dim);
  ASSERT_TRUE(RotaryEmbedding(q, k, Tensor::FromInts(pos, {7}), kTheta, c.rotary_dim).ok());
  // fp32 cos/sin of the same fp32 angle and two products: 1e-6 relative; a
  // bf16 output adds half a bf16 ulp.
  ExpectAllClose(q, want_q, 1e-6 + HalfUlp(c.dtype), "q");
  ExpectAllClose(k, want_k, 1e-6 + HalfUlp(c.dtype), "k");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RotaryTest,
                         ::testing::Values(RotaryCase{DType::kF32, 64, 64}, RotaryCase{DType::kBF16, 64, 64},
                                           RotaryCase{DType::kF32, 80, 40}, RotaryCase{DType::kBF16, 80, 40}),
                         [](const ::testing::TestParamInfo<RotaryCase>& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_d" +
                                  std::to_string(info.param.head_dim) + "_rot" +
                                  std::to_string(info.param.rotary_dim);
                         });

TEST(Rotary, LeavesFeaturesPastRotaryDimAndPositionZeroUnchanged) {
  const Tensor q = RandomTensor({2, 6, 80}, DType::kBF16, 53);
  const Tensor k = RandomTensor({2, 2, 80}, DType::kBF16, 54);
  const std::vector<float> q0 = q.ToFloats(), k0 = k.ToFloats();
  ASSERT_TRUE(RotaryEmbedding(q, k, Tensor::FromInts({0, 9}, {2}), kTheta, 40).ok());
  const std::vector<float> q1 = q.ToFloats(), k1 = k.ToFloats();
  for (int64_t h = 0; h < 6; ++h) {
    for (int64_t i = 0; i < 80; ++i) {
      EXPECT_EQ(q1[h * 80 + i], q0[h * 80 + i]) << "position 0, head " << h << ", feature " << i;
      if (i >= 40) {
        EXPECT_EQ(q1[(6 + h) * 80 + i], q0[(6 + h) * 80 + i]) << "head " << h << ", feature " << i;
      }
    }
  }
  for (int64_t i = 40; i < 80; ++i) EXPECT_EQ(k1[(2 + 1) * 80 + i], k0[(2 + 1) * 80 + i]);
}

TEST(Rotary, ZeroRowsAreAccepted) {
  EXPECT_TRUE(RotaryEmbedding(Tensor::Empty({0, 6, 64}, DType::kBF16), Tensor::Empty({0, 2, 64}, DType::kBF16),
                              Tensor::FromInts({}, {0}), kTheta, 64)
                  .ok());
}

}  // namespace
}  // namespace seam::kernels
