// CUDA kernels against the CPU reference through the public ops of ops.h: the
// same inputs run on host tensors and on CUDA copies, over odd row counts and
// hidden sizes, f32 and bf16; outputs are poisoned so unwritten elements show.
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

constexpr float kEps = 1e-6f;

// (dtype, rows, hidden). 1001 is not a multiple of any vector width: scalar path.
class RowOpTest : public CudaKernelsTest, public ::testing::WithParamInterface<std::tuple<DType, int64_t, int64_t>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  int64_t rows() const { return std::get<1>(GetParam()); }
  int64_t hidden() const { return std::get<2>(GetParam()); }
  Tolerance tol() const { return ToleranceFor(dtype()); }
};

TEST_P(RowOpTest, RmsNormMatchesCpu) {
  const Tensor x = Random({rows(), hidden()}, dtype(), 1);
  const Tensor w = Random({hidden()}, dtype(), 2, 0.5f, 1.5f);
  const Tensor out = PoisonedHost(x.shape(), dtype());
  ASSERT_TRUE(RmsNorm(x, w, kEps, out).ok());
  const Tensor gout = PoisonedGpu(x.shape(), dtype());
  ASSERT_TRUE(RmsNorm(OnGpu(x), OnGpu(w), kEps, gout).ok());
  ExpectClose(gout, out, tol(), "out");
}

TEST_P(RowOpTest, FusedAddRmsNormMatchesCpuAndRoundsResidual) {
  const Tensor x = Random({rows(), hidden()}, dtype(), 3);
  const Tensor res = Random({rows(), hidden()}, dtype(), 4);
  const Tensor w = Random({hidden()}, dtype(), 5, 0.5f, 1.5f);
  const Tensor gres = OnGpu(res);
  const Tensor out = PoisonedHost(x.shape(), dtype());
  ASSERT_TRUE(FusedAddRmsNorm(x, res, w, kEps, out).ok());
  const Tensor gout = PoisonedGpu(x.shape(), dtype());
  ASSERT_TRUE(FusedAddRmsNorm(OnGpu(x), gres, OnGpu(w), kEps, gout).ok());
  ExpectClose(gout, out, tol(), "out");
  ExpectClose(gres, res, tol(), "residual");
}

TEST_P(RowOpTest, FusedAddRmsNormOutMayAliasX) {
  const Tensor x = Random({rows(), hidden()}, dtype(), 6);
  const Tensor res = Random({rows(), hidden()}, dtype(), 7);
  const Tensor w = Random({hidden()}, dtype(), 8, 0.5f, 1.5f);
  const Tensor gx = OnGpu(x);
  const Tensor gres = OnGpu(res);
  ASSERT_TRUE(FusedAddRmsNorm(x, res, w, kEps, x).ok());
  ASSERT_TRUE(FusedAddRmsNorm(gx, gres, OnGpu(w), kEps, gx).ok());
  ExpectClose(gx, x, tol(), "out aliasing x");
  ExpectClose(gres, res, tol(), "residual");
}

TEST_P(RowOpTest, MoeFinalizeAddRmsNormMatchesCpu) {
  constexpr int64_t kTopK = 3;
  const Tensor e = Random({rows(), kTopK, hidden()}, dtype(), 21);
  const Tensor scales = Random({rows(), kTopK}, DType::kF32, 22, 0.0f, 1.0f);
  const Tensor res = Random({rows(), hidden()}, dtype(), 23);
  const Tensor w = Random({hidden()}, dtype(), 24, 0.5f, 1.5f);
  const Tensor gres = OnGpu(res);
  const Tensor out = PoisonedHost(res.shape(), dtype());
  ASSERT_TRUE(MoeFinalizeAddRmsNorm(e, scales, res, w, kEps, out).ok());
  const Tensor gout = PoisonedGpu(res.shape(), dtype());
  const absl::Status s = MoeFinalizeAddRmsNorm(OnGpu(e), OnGpu(scales), gres, OnGpu(w), kEps, gout);
  if (absl::IsUnimplemented(s)) GTEST_SKIP() << s;  // rows wider than one block's shared row
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gout, out, tol(), "out");
  ExpectClose(gres, res, tol(), "residual");
}

TEST_P(RowOpTest, SiluAndMulMatchesCpu) {
  const Tensor in = Random({rows(), 2 * hidden()}, dtype(), 9, -6.0f, 6.0f);
  const Tensor out = PoisonedHost({rows(), hidden()}, dtype());
  ASSERT_TRUE(SiluAndMul(in, out).ok());
  const Tensor gout = PoisonedGpu(out.shape(), dtype());
  ASSERT_TRUE(SiluAndMul(OnGpu(in), gout).ok());
  ExpectClose(gout, out, tol(), "out");
}

TEST_P(RowOpTest, AddInPlaceMatchesCpuForSameAndF32Source) {
  for (DType src_dtype : {dtype(), DType::kF32}) {
    const Tensor dst = Random({rows(), hidden()}, dtype(), 10);
    const Tensor src = Random({rows(), hidden()}, src_dtype, 11);
    const Tensor gdst = OnGpu(dst);
    ASSERT_TRUE(AddInPlace(dst, src).ok());
    ASSERT_TRUE(AddInPlace(gdst, OnGpu(src)).ok());
    ExpectClose(gdst, dst, tol(), std::string("dst += ") + DTypeName(src_dtype));
  }
}

TEST_P(RowOpTest, EmbeddingCopiesShardRowsAndZeroesOthers) {
  constexpr int64_t kVocab = 40;
  constexpr int64_t kVocabStart = 1000;
  std::vector<int32_t> ids(static_cast<size_t>(rows()));
  const int32_t outside[] = {999, 1040, 0, -5, 1 << 30};
  for (int64_t t = 0; t < rows(); ++t) {
    ids[t] = t % 3 == 2 ? outside[t % 5] : static_cast<int32_t>(kVocabStart + (t * 7) % kVocab);
  }
  const Tensor id_t = Tensor::FromInts(ids, {rows()});
  const Tensor table = Random({kVocab, hidden()}, dtype(), 12);
  const Tensor out = PoisonedHost({rows(), hidden()}, dtype());
  ASSERT_TRUE(Embedding(id_t, table, kVocabStart, out).ok());
  const Tensor gout = PoisonedGpu(out.shape(), dtype());
  ASSERT_TRUE(Embedding(OnGpu(id_t), OnGpu(table), kVocabStart, gout).ok());
  ExpectClose(gout, out, kExact, "out");  // a copy: bit-identical
}

std::string RowOpName(const ::testing::TestParamInfo<std::tuple<DType, int64_t, int64_t>>& info) {
  return std::string(DTypeName(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "x" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Grid, RowOpTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 7, 33),
                                            ::testing::Values<int64_t>(96, 1001, 4096 + 8, 5120)),
                         RowOpName);

// (dtype, rows, {q heads, k heads, head_dim, rotary_dim}).
class RotaryTest : public CudaKernelsTest,
                   public ::testing::WithParamInterface<std::tuple<DType, int64_t, std::vector<int64_t>>> {};

TEST_P(RotaryTest, RotaryEmbeddingMatchesCpu) {
  const auto& [dtype, rows, dims] = GetParam();
  const int64_t hq = dims[0], hk = dims[1], d = dims[2], rotary_dim = dims[3];
  std::vector<int32_t> pos(static_cast<size_t>(rows));
  // Positions up to 32k: the angle reaches tens of thousands of radians.
  for (int64_t t = 0; t < rows; ++t) pos[t] = static_cast<int32_t>((t * 977 + 3) % 32768);
  const Tensor positions = Tensor::FromInts(pos, {rows});
  const Tensor q = Random({rows, hq, d}, dtype, 13);
  const Tensor k = Random({rows, hk, d}, dtype, 14);
  const Tensor gq = OnGpu(q);
  const Tensor gk = OnGpu(k);
  ASSERT_TRUE(RotaryEmbedding(q, k, positions, 1e6f, rotary_dim).ok());
  ASSERT_TRUE(RotaryEmbedding(gq, gk, OnGpu(positions), 1e6f, rotary_dim).ok());
  // Features past rotary_dim are compared too: they must be left untouched.
  ExpectClose(gq, q, ToleranceFor(dtype), "q");
  ExpectClose(gk, k, ToleranceFor(dtype), "k");
}

// e.g. bf16_7_q4k2d128r128
std::string RotaryName(const ::testing::TestParamInfo<std::tuple<DType, int64_t, std::vector<int64_t>>>& info) {
  const auto& [dtype, rows, dims] = info.param;
  return std::string(DTypeName(dtype)) + "_" + std::to_string(rows) + "_q" + std::to_string(dims[0]) + "k" +
         std::to_string(dims[1]) + "d" + std::to_string(dims[2]) + "r" + std::to_string(dims[3]);
}

INSTANTIATE_TEST_SUITE_P(Grid, RotaryTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 7, 33),
                                            ::testing::Values(std::vector<int64_t>{4, 2, 128, 128},
                                                              std::vector<int64_t>{3, 1, 80, 80},
                                                              std::vector<int64_t>{5, 5, 64, 32},
                                                              // heads over several blocks of 8, the last partial
                                                              std::vector<int64_t>{13, 4, 64, 64},
                                                              std::vector<int64_t>{64, 1, 64, 64})),
                         RotaryName);

// Mixed dtypes the models use: bf16 activations with an f32 residual stream and f32 weight.
TEST_F(CudaKernelsTest, FusedAddRmsNormWithF32ResidualAndWeight) {
  for (int64_t hidden : {96, 1001, 5120}) {
    const Tensor x = Random({7, hidden}, DType::kBF16, 15);
    const Tensor res = Random({7, hidden}, DType::kF32, 16);
    const Tensor w = Random({hidden}, DType::kF32, 17, 0.5f, 1.5f);
    const Tensor gres = OnGpu(res);
    const Tensor out = PoisonedHost(x.shape(), DType::kBF16);
    ASSERT_TRUE(FusedAddRmsNorm(x, res, w, kEps, out).ok());
    const Tensor gout = PoisonedGpu(x.shape(), DType::kBF16);
    ASSERT_TRUE(FusedAddRmsNorm(OnGpu(x), gres, OnGpu(w), kEps, gout).ok());
    ExpectClose(gout, out, ToleranceFor(DType::kBF16), "out, hidden " + std::to_string(hidden));
    ExpectClose(gres, res, ToleranceFor(DType::kF32), "f32 residual, hidden " + std::to_string(hidden));
  }
}

// Rows wider than 48 KiB of fp32 need opted-in shared memory; rows wider than
// the device's shared memory recompute the sum instead of staging it.
TEST_F(CudaKernelsTest, FusedAddRmsNormOnWideRows) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t hidden : {20000, 65536 + 8}) {
      const Tensor x = Random({3, hidden}, dtype, 18);
      const Tensor res = Random({3, hidden}, dtype, 19);
      const Tensor w = Random({hidden}, dtype, 20, 0.5f, 1.5f);
      const Tensor gx = OnGpu(x);
      const Tensor gres = OnGpu(res);
      ASSERT_TRUE(FusedAddRmsNorm(x, res, w, kEps, x).ok());
      ASSERT_TRUE(FusedAddRmsNorm(gx, gres, OnGpu(w), kEps, gx).ok());
      const std::string what = std::string(DTypeName(dtype)) + " hidden " + std::to_string(hidden);
      ExpectClose(gx, x, ToleranceFor(dtype), "out aliasing x, " + what);
      ExpectClose(gres, res, ToleranceFor(dtype), "residual, " + what);
    }
  }
}

// Views that start off a 16-byte boundary take the scalar path.
TEST_F(CudaKernelsTest, MisalignedViewsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor x = Random({7, 96}, dtype, 21);
    const Tensor res = Random({7, 96}, dtype, 22);
    const Tensor w = Random({96}, dtype, 23, 0.5f, 1.5f);
    const Tensor gx = MisalignedGpuCopy(x);
    const Tensor gres = MisalignedGpuCopy(res);
    ASSERT_TRUE(FusedAddRmsNorm(x, res, w, kEps, x).ok());
    ASSERT_TRUE(FusedAddRmsNorm(gx, gres, MisalignedGpuCopy(w), kEps, gx).ok());
    ExpectClose(gx, x, ToleranceFor(dtype), std::string("out, ") + DTypeName(dtype));
    ExpectClose(gres, res, ToleranceFor(dtype), std::string("residual, ") + DTypeName(dtype));
    const Tensor in = Random({7, 192}, dtype, 24);
    const Tensor out = PoisonedHost({7, 96}, dtype);
    const Tensor gout = MisalignedGpuCopy(out);
    ASSERT_TRUE(SiluAndMul(in, out).ok());
    ASSERT_TRUE(SiluAndMul(MisalignedGpuCopy(in), gout).ok());
    ExpectClose(gout, out, ToleranceFor(dtype), std::string("silu out, ") + DTypeName(dtype));
  }
}

// T = 0 launches nothing and succeeds.
TEST_F(CudaKernelsTest, ZeroRowsSucceed) {
  const Tensor x = Tensor::Empty({0, 96}, DType::kBF16, Gpu());
  const Tensor w = OnGpu(Random({96}, DType::kBF16, 25));
  EXPECT_TRUE(RmsNorm(x, w, kEps, x).ok());
  EXPECT_TRUE(FusedAddRmsNorm(x, Tensor::Empty({0, 96}, DType::kBF16, Gpu()), w, kEps, x).ok());
  EXPECT_TRUE(SiluAndMul(Tensor::Empty({0, 192}, DType::kBF16, Gpu()), x).ok());
  EXPECT_TRUE(AddInPlace(x, x).ok());
  const Tensor ids = Tensor::Empty({0}, DType::kI32, Gpu());
  EXPECT_TRUE(Embedding(ids, OnGpu(Random({5, 96}, DType::kBF16, 26)), 0, x).ok());
  const Tensor q = Tensor::Empty({0, 2, 64}, DType::kBF16, Gpu());
  EXPECT_TRUE(RotaryEmbedding(q, q, ids, 1e4f, 64).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace seam::kernels::cuda_test
