// Matmul against a double-precision loop: x[M, K] · w[N, K]ᵀ in f32 and with
// bf16 operands, across weight-conversion blocks, and with empty dimensions.
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HalfUlp;
using testing::RandomTensor;
using testing::Values;

std::vector<double> ReferenceMatmul(const Tensor& x, const Tensor& w) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  const std::vector<double> xv = Values(x), wv = Values(w);
  std::vector<double> out(m * n, 0.0);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0.0;
      for (int64_t i = 0; i < k; ++i) acc += xv[r * k + i] * wv[c * k + i];
      out[r * n + c] = acc;
    }
  }
  return out;
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesDoubleReferenceOnOddSizes) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({7, 96}, dtype, 1);
  const Tensor w = RandomTensor({33, 96}, dtype, 2);
  const Tensor out = Tensor::Empty({7, 33}, dtype);
  ASSERT_TRUE(Matmul(x, w, out).ok());
  // fp32 accumulation over K = 96 terms vs double: 1e-5 relative to the
  // output's scale; a bf16 output adds half a bf16 ulp for its one rounding.
  ExpectAllClose(out, ReferenceMatmul(x, w), 1e-5 + HalfUlp(dtype), "out");
}

TEST_P(MatmulTest, WritesAnFp32OutputFromHalfPrecisionOperands) {
  const Tensor x = RandomTensor({5, 80}, GetParam(), 3);
  const Tensor w = RandomTensor({17, 80}, GetParam(), 4);
  const Tensor out = Tensor::Empty({5, 17}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, out).ok());
  // Operands are widened exactly, so only fp32 accumulation error remains.
  ExpectAllClose(out, ReferenceMatmul(x, w), 1e-5, "out");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

TEST(MatmulBlocks, WeightWiderThanOneConversionBlockMatchesReference) {
  // 4 Mi fp32 weights are widened per block; K = 64 makes a block 65536 rows,
  // so N = 65600 spans two blocks, the second one short.
  const Tensor x = RandomTensor({3, 64}, DType::kBF16, 5);
  const Tensor w = RandomTensor({65600, 64}, DType::kBF16, 6);
  const Tensor out = Tensor::Empty({3, 65600}, DType::kF32);
  ASSERT_TRUE(Matmul(x, w, out).ok());
  ExpectAllClose(out, ReferenceMatmul(x, w), 1e-5, "out");
}

TEST(MatmulThreads, ConcurrentCallsFromRankThreadsEachGetTheirOwnProduct) {
  // CPU tensor-parallel ranks are threads of one process, each calling the
  // same OpenBLAS concurrently.
  constexpr int kThreads = 4;
  std::vector<Tensor> xs, ws, outs;
  for (int i = 0; i < kThreads; ++i) {
    xs.push_back(RandomTensor({9, 128}, DType::kBF16, 100 + i));
    ws.push_back(RandomTensor({200, 128}, DType::kBF16, 200 + i));
    outs.push_back(Tensor::Empty({9, 200}, DType::kF32));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep) SEAM_CHECK_OK(Matmul(xs[i], ws[i], outs[i]));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) ExpectAllClose(outs[i], ReferenceMatmul(xs[i], ws[i]), 1e-5, "out");
}

TEST(MatmulEmpty, ZeroRowsWriteNothing) {
  const Tensor x = Tensor::Empty({0, 96}, DType::kBF16);
  const Tensor w = RandomTensor({8, 96}, DType::kBF16, 7);
  const Tensor out = Tensor::Empty({0, 8}, DType::kBF16);
  EXPECT_TRUE(Matmul(x, w, out).ok());
}

TEST(MatmulEmpty, EmptyInnerDimensionGivesZeros) {
  const Tensor x = Tensor::Empty({2, 0}, DType::kF32);
  const Tensor w = Tensor::Empty({3, 0}, DType::kF32);
  const Tensor out = Tensor::FromFloats({1, 2, 3, 4, 5, 6}, {2, 3});
  ASSERT_TRUE(Matmul(x, w, out).ok());
  EXPECT_EQ(out.ToFloats(), std::vector<float>(6, 0.0f));
}

}  // namespace
}  // namespace seam::kernels
