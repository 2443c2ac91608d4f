// QkvNormRopeCache on the CPU: equal to the separate ops it fuses on copies
// of the q, k and v column ranges, and its argument errors.
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"

namespace seam::kernels {
namespace {

Tensor Ramp(const Shape& shape, float scale) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((i * 7919) % 61) / 61.0f - 0.5f * scale;
  return Tensor::FromFloats(v, shape);
}

Tensor Columns(const Tensor& x, int64_t begin, int64_t width) {
  std::vector<float> v;
  for (int64_t r = 0; r < x.dim(0); ++r) {
    for (int64_t c = 0; c < width; ++c) v.push_back(x.data<float>()[r * x.dim(1) + begin + c]);
  }
  return Tensor::FromFloats(v, {x.dim(0), width});
}

TEST(QkvNormRopeCache, EqualsTheSeparateOps) {
  const int64_t t = 5, hq = 4, hk = 2, d = 8, blocks = 2, bs = 4;
  const Tensor qkv = Ramp({t, (hq + 2 * hk) * d}, 3.0f), qn = Ramp({d}, 1.0f), kn = Ramp({d}, 2.0f);
  const Tensor pos = Tensor::FromInts({0, 3, 9, 100, 7}, {t}), slots = Tensor::FromInts({0, 5, -1, 2, 7}, {t});
  const Tensor kc = Tensor::Zeros({blocks, bs, hk, d}, DType::kF32), vc = Tensor::Zeros({blocks, bs, hk, d}, DType::kF32);
  const Tensor q = Tensor::Empty({t, hq, d}, DType::kF32);
  ASSERT_TRUE(QkvNormRopeCache(qkv, qn, kn, 1e-6f, pos, 1e4f, slots, kc, vc, q).ok());

  const Tensor q2 = Tensor::Empty({t * hq, d}, DType::kF32), k2 = Tensor::Empty({t * hk, d}, DType::kF32);
  ASSERT_TRUE(RmsNorm(Columns(qkv, 0, hq * d).Reshape({t * hq, d}).value(), qn, 1e-6f, q2).ok());
  ASSERT_TRUE(RmsNorm(Columns(qkv, hq * d, hk * d).Reshape({t * hk, d}).value(), kn, 1e-6f, k2).ok());
  const Tensor q3 = q2.Reshape({t, hq, d}).value(), k3 = k2.Reshape({t, hk, d}).value();
  ASSERT_TRUE(RotaryEmbedding(q3, k3, pos, 1e4f, d).ok());
  const Tensor kc2 = Tensor::Zeros({blocks, bs, hk, d}, DType::kF32), vc2 = Tensor::Zeros({blocks, bs, hk, d}, DType::kF32);
  ASSERT_TRUE(WriteKvCache(k3, Columns(qkv, (hq + hk) * d, hk * d).Reshape({t, hk, d}).value(), slots, kc2, vc2).ok());
  for (int64_t i = 0; i < q.numel(); ++i) ASSERT_EQ(q.data<float>()[i], q3.data<float>()[i]) << i;
  for (int64_t i = 0; i < kc.numel(); ++i) ASSERT_EQ(kc.data<float>()[i], kc2.data<float>()[i]) << i;
  for (int64_t i = 0; i < vc.numel(); ++i) ASSERT_EQ(vc.data<float>()[i], vc2.data<float>()[i]) << i;
}

TEST(QkvNormRopeCache, RejectsAQkvOfTheWrongWidth) {
  const Tensor qkv = Tensor::Zeros({3, 40}, DType::kF32), n = Tensor::Zeros({8}, DType::kF32);
  const Tensor idx = Tensor::FromInts({0, 1, 2}, {3});
  const Tensor kc = Tensor::Zeros({2, 4, 2, 8}, DType::kF32), vc = Tensor::Zeros({2, 4, 2, 8}, DType::kF32);
  const absl::Status s =
      QkvNormRopeCache(qkv, n, n, 1e-6f, idx, 1e4f, idx, kc, vc, Tensor::Empty({3, 4, 8}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("qkv"), absl::string_view::npos) << s.message();
}

}  // namespace
}  // namespace seam::kernels
