// CUDA Matmul (cuBLASLt, the GEMV kernel for M ≤ 8, and the fallback kernel
// for dtype pairings cuBLASLt lacks) against the CPU reference (OpenBLAS sgemm on fp32-widened operands),
// over odd M, K, N, f32 and bf16; outputs are poisoned so unwritten elements show.
// Problems of 3-512 rows are autotuned (the fastest of cuBLASLt's candidates,
// their split-K variants and, up to 8 rows, the GEMV), so whichever kernel
// wins on the machine is the one compared; cuda_matmul_tuning_test.cc
// compares it with the heuristic's first pick.
//
// Tolerances: both sides accumulate in fp32 (no TF32 on the GPU) but in
// different orders (blocked/split sums vs OpenBLAS's kernels), so an f32
// output agrees to ~1e-5 relative; with K = 1000 terms of magnitude ≤ 1 the
// sum can cancel, so the absolute floor is scaled by sqrt(K) · 2^-23-ish
// (1e-4). bf16/f16 outputs are each side's fp32 value rounded once: a few fp32
// ulps can flip that rounding, i.e. one storage ulp (2^-8 relative for bf16).
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

// Relative tolerance of the output dtype, absolute floor for cancellation.
Tolerance MatmulTolerance(DType out) {
  Tolerance t = ToleranceFor(out);
  t.atol = out == DType::kF32 ? 1e-4f : 4e-3f;
  return t;
}

void CheckMatmul(int64_t m, int64_t k, int64_t n, DType x_dtype, DType w_dtype, DType out_dtype, uint32_t seed) {
  const std::string what = std::string("x ") + DTypeName(x_dtype) + " w " + DTypeName(w_dtype) + " out " +
                           DTypeName(out_dtype) + " M=" + std::to_string(m) + " K=" + std::to_string(k) +
                           " N=" + std::to_string(n);
  const Tensor x = Random({m, k}, x_dtype, seed);
  const Tensor w = Random({n, k}, w_dtype, seed + 1);
  const Tensor out = PoisonedHost({m, n}, out_dtype);
  ASSERT_TRUE(Matmul(x, w, out).ok()) << what;
  const Tensor gout = PoisonedGpu({m, n}, out_dtype);
  const absl::Status s = Matmul(OnGpu(x), OnGpu(w), gout);
  ASSERT_TRUE(s.ok()) << what << ": " << s;
  ExpectClose(gout, out, MatmulTolerance(out_dtype), what);
}

// (operand dtype, out dtype, M, K, N)
using MatmulParam = std::tuple<DType, DType, int64_t, int64_t, int64_t>;
class CudaMatmulTest : public CudaKernelsTest, public ::testing::WithParamInterface<MatmulParam> {};

TEST_P(CudaMatmulTest, MatchesCpu) {
  const auto& [in, out, m, k, n] = GetParam();
  CheckMatmul(m, k, n, in, in, out, static_cast<uint32_t>(m * 131 + k * 7 + n));
}

std::string MatmulName(const ::testing::TestParamInfo<MatmulParam>& info) {
  const auto& [in, out, m, k, n] = info.param;
  return std::string(DTypeName(in)) + "_to_" + DTypeName(out) + "_" + std::to_string(m) + "x" + std::to_string(k) +
         "x" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaMatmulTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(0, 1, 7, 33, 130),
                                            ::testing::Values<int64_t>(64, 1000),
                                            ::testing::Values<int64_t>(1, 95, 4096)),
                         MatmulName);

// Small M (≤ 8) with one operand dtype, K a multiple of the 16-byte vector
// width and aligned operands may take the GEMV kernel (always for M ≤ 2);
// K = 1000 with 16-bit operands (not a multiple of 8) and M = 9 (the first M
// past the GEMV) take cuBLASLt. (operand dtype, out dtype, M, K, N)
class CudaMatmulSmallMTest : public CudaKernelsTest, public ::testing::WithParamInterface<MatmulParam> {};

TEST_P(CudaMatmulSmallMTest, MatchesCpu) {
  const auto& [in, out, m, k, n] = GetParam();
  CheckMatmul(m, k, n, in, in, out, static_cast<uint32_t>(m * 977 + k * 13 + n));
}

INSTANTIATE_TEST_SUITE_P(Gemv, CudaMatmulSmallMTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 2, 3, 7, 8, 9),
                                            ::testing::Values<int64_t>(64, 1000, 1024, 3072),
                                            ::testing::Values<int64_t>(1, 95, 1024, 4096)),
                         MatmulName);

TEST_F(CudaKernelsTest, CudaMatmulF16AndMixedDtypes) {
  CheckMatmul(7, 64, 95, DType::kF16, DType::kF16, DType::kF16, 1);    // GEMV or cuBLASLt, as timed
  CheckMatmul(7, 64, 95, DType::kF16, DType::kF16, DType::kF32, 2);    // GEMV or cuBLASLt, as timed
  CheckMatmul(33, 64, 95, DType::kF16, DType::kF16, DType::kF16, 21);  // cuBLASLt
  CheckMatmul(7, 64, 95, DType::kBF16, DType::kBF16, DType::kF16, 3);  // GEMV (no cuBLASLt kernel)
  CheckMatmul(33, 64, 95, DType::kBF16, DType::kBF16, DType::kF16, 23);  // no cuBLASLt kernel: fallback
  CheckMatmul(2, 1024, 4096, DType::kF16, DType::kF16, DType::kBF16, 24);  // GEMV
  CheckMatmul(3, 1024, 95, DType::kF32, DType::kF32, DType::kF16, 25);     // GEMV
  CheckMatmul(7, 1000, 95, DType::kF32, DType::kBF16, DType::kF32, 4);  // mixed operands: fallback
  CheckMatmul(33, 64, 130, DType::kBF16, DType::kF32, DType::kBF16, 5);
}

// x and w of different dtypes (matmul_mixed.cu up to 512 rows with K a
// multiple of 4; the tiled fallback above 512 rows or for other K): an fp32
// router weight times 16-bit activations (LongCat-Flash's shape: K 6144,
// N 96 = 64 routed + 32 zero experts), odd N, M across the 8-row tile and
// the 512-row bound (the grid's same-dtype pairs take the usual kernels).
// (x dtype, w dtype, M, K, N); out f32.
using MixedParam = std::tuple<DType, DType, int64_t, int64_t, int64_t>;
class CudaMatmulMixedTest : public CudaKernelsTest, public ::testing::WithParamInterface<MixedParam> {};

TEST_P(CudaMatmulMixedTest, MatchesCpu) {
  const auto& [xd, wd, m, k, n] = GetParam();
  // Past 512 rows mixed dtypes take the tiled fallback, which sums all K
  // products in one fp32 accumulator, one after another: at K = 6144 its
  // rounding (~K · 2^-24 of the terms' magnitude) passes the f32 tolerance
  // above, which assumes blocked sums.
  if (m > 512 && k > 1000 && xd != wd) GTEST_SKIP() << "the tiled fallback's sequential sum at K=" << k;
  CheckMatmul(m, k, n, xd, wd, DType::kF32, static_cast<uint32_t>(m * 71 + k * 3 + n));
}

std::string MixedName(const ::testing::TestParamInfo<MixedParam>& info) {
  const auto& [xd, wd, m, k, n] = info.param;
  return std::string("x_") + DTypeName(xd) + "_w_" + DTypeName(wd) + "_" + std::to_string(m) + "x" +
         std::to_string(k) + "x" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(Mixed, CudaMatmulMixedTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16, DType::kF32),
                                            ::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 8, 9, 512, 513),
                                            ::testing::Values<int64_t>(18, 1000, 6144),
                                            ::testing::Values<int64_t>(1, 97)),
                         MixedName);

// The mixed kernel's 16-bit output, and its bits repeat call to call.
TEST_F(CudaKernelsTest, CudaMatmulMixedBf16OutAndRepeatable) {
  CheckMatmul(3, 6144, 96, DType::kBF16, DType::kF32, DType::kBF16, 41);
  const Tensor x = OnGpu(Random({32, 6144}, DType::kBF16, 42));
  const Tensor w = OnGpu(Random({96, 6144}, DType::kF32, 43));
  const Tensor a = PoisonedGpu({32, 96}, DType::kF32);
  const Tensor b = PoisonedGpu({32, 96}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, a).ok());
  ASSERT_TRUE(Matmul(x, w, b).ok());
  absl::StatusOr<Tensor> ha = a.To(Device::CPU());
  ASSERT_TRUE(ha.ok());
  ExpectClose(b, *ha, kExact, "second call");
}

// Lm-head and fused-projection shapes of the decode benchmark.
TEST_F(CudaKernelsTest, CudaMatmulModelShapes) {
  CheckMatmul(3, 1024, 151936, DType::kBF16, DType::kBF16, DType::kF32, 6);   // GEMV or cuBLASLt, as timed
  CheckMatmul(4, 1024, 151936, DType::kBF16, DType::kBF16, DType::kF32, 16);  // the widest M the static rule gives the GEMV
  CheckMatmul(5, 1024, 151936, DType::kBF16, DType::kBF16, DType::kF32, 17);
  CheckMatmul(1, 1024, 1024, DType::kBF16, DType::kBF16, DType::kBF16, 18);
  CheckMatmul(1, 2048, 1024, DType::kBF16, DType::kBF16, DType::kBF16, 19);
  CheckMatmul(8, 3072, 1024, DType::kBF16, DType::kBF16, DType::kBF16, 20);
  CheckMatmul(8, 1024, 6144, DType::kBF16, DType::kBF16, DType::kBF16, 22);
  CheckMatmul(64, 1024, 6144, DType::kBF16, DType::kBF16, DType::kBF16, 7);
  CheckMatmul(257, 1024, 4096, DType::kBF16, DType::kBF16, DType::kBF16, 8);
}

TEST_F(CudaKernelsTest, CudaMatmulZeroKWritesZeros) {
  const Tensor x = Random({5, 0}, DType::kBF16, 9);
  const Tensor w = Random({6, 0}, DType::kBF16, 10);
  const Tensor out = PoisonedHost({5, 6}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, out).ok());
  const Tensor gout = PoisonedGpu({5, 6}, DType::kF32);
  ASSERT_TRUE(Matmul(OnGpu(x), OnGpu(w), gout).ok());
  ExpectClose(gout, out, kExact, "K = 0");
}

// Operands not on a 16-byte boundary: cuBLASLt must be asked for less-aligned kernels.
TEST_F(CudaKernelsTest, CudaMatmulMisalignedOperands) {
  const Tensor x = Random({7, 64}, DType::kBF16, 11);
  const Tensor w = Random({95, 64}, DType::kBF16, 12);
  const Tensor out = PoisonedHost({7, 95}, DType::kBF16);
  ASSERT_TRUE(Matmul(x, w, out).ok());
  const Tensor gout = MisalignedGpuCopy(PoisonedHost({7, 95}, DType::kBF16));
  const absl::Status s = Matmul(MisalignedGpuCopy(x), MisalignedGpuCopy(w), gout);
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gout, out, MatmulTolerance(DType::kBF16), "misaligned");
}

// Misaligned x or w sends a GEMV-sized problem to cuBLASLt; a misaligned out
// alone stays on the GEMV (it stores element by element).
TEST_F(CudaKernelsTest, CudaMatmulSmallMMisalignedOperands) {
  const Tensor x = Random({3, 1024}, DType::kBF16, 31);
  const Tensor w = Random({95, 1024}, DType::kBF16, 32);
  const Tensor out = PoisonedHost({3, 95}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, out).ok());
  for (int variant = 0; variant < 3; ++variant) {
    const Tensor gx = variant == 0 ? MisalignedGpuCopy(x) : OnGpu(x);
    const Tensor gw = variant == 1 ? MisalignedGpuCopy(w) : OnGpu(w);
    const Tensor gout =
        variant == 2 ? MisalignedGpuCopy(PoisonedHost({3, 95}, DType::kF32)) : PoisonedGpu({3, 95}, DType::kF32);
    const absl::Status s = Matmul(gx, gw, gout);
    ASSERT_TRUE(s.ok()) << s;
    ExpectClose(gout, out, MatmulTolerance(DType::kF32), "misaligned operand " + std::to_string(variant));
  }
}

// Repeated GEMV calls give the same bits (fixed summation order).
TEST_F(CudaKernelsTest, CudaMatmulGemvRepeatable) {
  const Tensor x = OnGpu(Random({5, 3072}, DType::kBF16, 33));
  const Tensor w = OnGpu(Random({1024, 3072}, DType::kBF16, 34));
  const Tensor a = PoisonedGpu({5, 1024}, DType::kF32);
  const Tensor b = PoisonedGpu({5, 1024}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, a).ok());
  ASSERT_TRUE(Matmul(x, w, b).ok());
  absl::StatusOr<Tensor> ha = a.To(Device::CPU());
  ASSERT_TRUE(ha.ok());
  ExpectClose(b, *ha, kExact, "second call");
}

// The same call twice (the second from the cached plan) gives the same bits.
TEST_F(CudaKernelsTest, CudaMatmulRepeatableFromCachedPlan) {
  const Tensor x = OnGpu(Random({33, 1000}, DType::kBF16, 13));
  const Tensor w = OnGpu(Random({4096, 1000}, DType::kBF16, 14));
  const Tensor a = PoisonedGpu({33, 4096}, DType::kF32);
  const Tensor b = PoisonedGpu({33, 4096}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, a).ok());
  ASSERT_TRUE(Matmul(x, w, b).ok());
  absl::StatusOr<Tensor> ha = a.To(Device::CPU());
  ASSERT_TRUE(ha.ok());
  ExpectClose(b, *ha, kExact, "second call");
}

}  // namespace
}  // namespace seam::kernels::cuda_test
