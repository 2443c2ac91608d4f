// CUDA HeadMatmul (one strided-batched cuBLASLt GEMM over the heads) against
// the CPU op (per head OpenBLAS sgemm on fp32-widened operands) for the
// shapes of LongCat-Flash's absorbed attention (K, N = 128, 512 and 512, 128)
// at 1 to 64 heads, contiguous and as column blocks of wider matrices (the
// columns outside the block must keep their values), and captured in a graph.
//
// Tolerances (as cuda_matmul_test.cc): both sides accumulate in fp32 (no
// TF32) in different orders, so f32 agrees to ~1e-5 relative, with an
// absolute floor of 1e-4 where K ≤ 512 terms of magnitude ≤ 1 cancel; a bf16
// output is each side's fp32 value rounded once, so a few fp32 ulps can flip
// that rounding: one bf16 ulp (2^-7 relative), floor 4e-3.
#include <string>
#include <tuple>

#include "cuda_test_util.h"
#include "seam/kernels/head_matmul.h"

namespace seam::kernels::cuda_test {
namespace {

Tolerance HeadTolerance(DType dtype) {
  Tolerance t = ToleranceFor(dtype);
  t.atol = dtype == DType::kF32 ? 1e-4f : 4e-3f;
  return t;
}

// Columns each head's block is widened by in the strided case, and x's offset in it.
constexpr int64_t kPad = 64, kXOffset = 32;

// (dtype, T, H, K, N, strided)
using HeadParam = std::tuple<DType, int64_t, int64_t, std::tuple<int64_t, int64_t>, bool>;
class CudaHeadMatmulTest : public CudaKernelsTest, public ::testing::WithParamInterface<HeadParam> {};

TEST_P(CudaHeadMatmulTest, MatchesCpu) {
  const auto& [dtype, t, heads, kn, strided] = GetParam();
  const auto& [k, n] = kn;
  const uint32_t seed = static_cast<uint32_t>(t * 131 + heads * 7 + k + n + (strided ? 1 : 0));
  const int64_t xw = strided ? k + kPad : k, ow = strided ? n + kPad : n;
  const int64_t xo = strided ? kXOffset : 0;
  const Tensor x_wide = Random({t, heads * xw}, dtype, seed);
  const Tensor w = Random({heads, n, k}, dtype, seed + 1);
  const Tensor out_wide = Random({t, heads * ow}, dtype, seed + 2);
  const Tensor gx_wide = OnGpu(x_wide), gw = OnGpu(w), gout_wide = OnGpu(out_wide);
  const auto view = [&](const Tensor& wide, int64_t width, int64_t offset, int64_t inner) {
    return wide.Reshape({t, heads, width}).value().Narrow(2, offset, inner);
  };
  ASSERT_TRUE(HeadMatmul(view(x_wide, xw, xo, k), w, view(out_wide, ow, 0, n)).ok());
  const absl::Status s = HeadMatmul(view(gx_wide, xw, xo, k), gw, view(gout_wide, ow, 0, n));
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gout_wide, out_wide, HeadTolerance(dtype), "out");
}

std::string HeadName(const ::testing::TestParamInfo<HeadParam>& info) {
  const auto& [dtype, t, heads, kn, strided] = info.param;
  return std::string(DTypeName(dtype)) + "_T" + std::to_string(t) + "_H" + std::to_string(heads) + "_K" +
         std::to_string(std::get<0>(kn)) + "_N" + std::to_string(std::get<1>(kn)) + (strided ? "_strided" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CudaHeadMatmulTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16), ::testing::Values<int64_t>(1, 7, 64),
                       ::testing::Values<int64_t>(1, 16, 64),
                       ::testing::Values(std::make_tuple<int64_t, int64_t>(128, 512),
                                         std::make_tuple<int64_t, int64_t>(512, 128)),
                       ::testing::Bool()),
    HeadName);

// Decode's shape (T = 1, 64 heads, x a column block) eagerly, then captured in
// a CUDA graph and replayed: the plan made eagerly is reused with no
// allocation or synchronisation inside the capture.
TEST_F(CudaKernelsTest, CudaHeadMatmulCapturesInAGraph) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const int64_t t = 1, heads = 64, k = 128, n = 512, xw = k + kPad;
    const Tensor x_wide = Random({t, heads * xw}, dtype, 11);
    const Tensor w = Random({heads, n, k}, dtype, 12);
    const Tensor x = x_wide.Reshape({t, heads, xw}).value().Narrow(2, 0, k);
    const Tensor want = Tensor::Empty({t, heads, n}, dtype);
    ASSERT_TRUE(HeadMatmul(x, w, want).ok());
    const Tensor gx = OnGpu(x_wide).Reshape({t, heads, xw}).value().Narrow(2, 0, k), gw = OnGpu(w);
    const Tensor gout = PoisonedGpu({t, heads, n}, dtype);
    ExpectEagerAndGraphReplaysMatch([&] { return HeadMatmul(gx, gw, gout); }, gout, want, HeadTolerance(dtype));
  }
}

}  // namespace
}  // namespace seam::kernels::cuda_test
