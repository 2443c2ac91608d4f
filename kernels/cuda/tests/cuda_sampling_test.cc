// CUDA softmax, argmax, top-k, sampling and MoE ops against the CPU reference
// on the same inputs; outputs are poisoned so unwritten elements show.
//
// Softmax tolerances: f32 output, 1e-5 relative (both fp32, but the GPU sums
// exp in a block tree and uses CUDA's expf, the CPU a sequential glibc sum);
// bf16 output, one storage ulp (1/128 relative): each side rounds its own
// fp32 value once and ulp-level fp32 differences can flip that rounding.
// Indices (argmax, top-k, routing, sampled tokens) must be identical: the
// inputs are distinct values (no near-ties at stake) or exact ties that test
// the lower-index rule.
#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

constexpr int64_t kVocab = 151936;

// ---- softmax, argmax, top-k --------------------------------------------------------------

using RowParam = std::tuple<DType, int64_t, int64_t>;  // dtype, rows, n
class CudaSamplingRowTest : public CudaKernelsTest, public ::testing::WithParamInterface<RowParam> {};

TEST_P(CudaSamplingRowTest, SoftmaxMatchesCpu) {
  const auto& [dtype, rows, n] = GetParam();
  const Tensor x = Random({rows, n}, dtype, 1, -8.0f, 8.0f);
  for (DType out_dtype : {DType::kF32, dtype}) {
    const Tensor out = PoisonedHost({rows, n}, out_dtype);
    ASSERT_TRUE(Softmax(x, out).ok());
    const Tensor gout = PoisonedGpu({rows, n}, out_dtype);
    ASSERT_TRUE(Softmax(OnGpu(x), gout).ok());
    ExpectClose(gout, out, ToleranceFor(out_dtype), std::string("softmax to ") + DTypeName(out_dtype));
  }
}

TEST_P(CudaSamplingRowTest, ArgmaxMatchesCpu) {
  const auto& [dtype, rows, n] = GetParam();
  const Tensor x = DistinctRows(rows, n, DType::kF32, 2);
  const Tensor out = Tensor::Empty({rows}, DType::kI32, Device::CPU());
  ASSERT_TRUE(Argmax(x, out).ok());
  const Tensor gout = PoisonedIndexGpu({rows});
  ASSERT_TRUE(Argmax(OnGpu(x), gout).ok());
  EXPECT_EQ(ToInts(gout), HostInts(out));
}

TEST_P(CudaSamplingRowTest, TopKMatchesCpu) {
  const auto& [dtype, rows, n] = GetParam();
  // f32 rows of distinct values; bf16 rows have many exact ties (rounding): the lower-index rule decides.
  const Tensor x = dtype == DType::kF32 ? DistinctRows(rows, n, dtype, 3) : Random({rows, n}, dtype, 3);
  for (int64_t k : {int64_t{1}, int64_t{8}, int64_t{64}, n}) {
    if (k > n) continue;
    const Tensor values = PoisonedHost({rows, k}, DType::kF32);
    const Tensor indices = Tensor::Empty({rows, k}, DType::kI32, Device::CPU());
    ASSERT_TRUE(TopK(x, k, values, indices).ok());
    const Tensor gvalues = PoisonedGpu({rows, k}, DType::kF32);
    const Tensor gindices = PoisonedIndexGpu({rows, k});
    const absl::Status s = TopK(OnGpu(x), k, gvalues, gindices);
    ASSERT_TRUE(s.ok()) << s;
    ExpectClose(gvalues, values, kExact, "top-k values, k = " + std::to_string(k));
    EXPECT_EQ(ToInts(gindices), HostInts(indices)) << "k = " << k;
  }
}

std::string RowName(const ::testing::TestParamInfo<RowParam>& info) {
  const auto& [dtype, rows, n] = info.param;
  return std::string(DTypeName(dtype)) + "_" + std::to_string(rows) + "x" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaSamplingRowTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 7, 33),
                                            ::testing::Values<int64_t>(1, 95, 128, 4099)),
                         RowName);

TEST_F(CudaKernelsTest, CudaArgmaxAndTopKTiesGoToLowerIndex) {
  // Row r: all zeros with the maximum 1.0 at columns 5 + r and 40 + r.
  const int64_t rows = 3, n = 100;
  std::vector<float> v(rows * n, 0.0f);
  for (int64_t r = 0; r < rows; ++r) v[r * n + 5 + r] = v[r * n + 40 + r] = 1.0f;
  const Tensor x = Tensor::FromFloats(v, {rows, n}, DType::kF32);
  const Tensor gout = PoisonedIndexGpu({rows});
  ASSERT_TRUE(Argmax(OnGpu(x), gout).ok());
  EXPECT_EQ(ToInts(gout), (std::vector<int32_t>{5, 6, 7}));
  const Tensor values = PoisonedGpu({rows, 4}, DType::kF32);
  const Tensor indices = PoisonedIndexGpu({rows, 4});
  ASSERT_TRUE(TopK(OnGpu(x), 4, values, indices).ok());
  EXPECT_EQ(ToInts(indices), (std::vector<int32_t>{5, 40, 0, 1, 6, 41, 0, 1, 7, 42, 0, 1}));
}

// Argmax over few and many rows, narrow rows (one block per row) and wide ones
// (a cluster of blocks per row); bf16 rows hold exact ties from rounding.
using ArgmaxParam = std::tuple<DType, int64_t, int64_t>;  // dtype, rows, n
class CudaArgmaxTest : public CudaKernelsTest, public ::testing::WithParamInterface<ArgmaxParam> {};

TEST_P(CudaArgmaxTest, MatchesCpu) {
  const auto& [dtype, rows, n] = GetParam();
  const Tensor x = DistinctRows(rows, n, dtype, static_cast<uint32_t>(rows * 7 + n));
  const Tensor out = Tensor::Empty({rows}, DType::kI32, Device::CPU());
  ASSERT_TRUE(Argmax(x, out).ok());
  const Tensor gout = PoisonedIndexGpu({rows});
  ASSERT_TRUE(Argmax(OnGpu(x), gout).ok());
  EXPECT_EQ(ToInts(gout), HostInts(out));
}

INSTANTIATE_TEST_SUITE_P(Rows, CudaArgmaxTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 3, 64, 300),
                                            ::testing::Values<int64_t>(1, 7, 8193, kVocab)),
                         RowName);

// Wide rows with exact ties in different blocks of a row's cluster, +inf, -inf
// and NaN, with rows starting on a 16-byte boundary (n = kVocab), rows off it
// (odd n) and a misaligned copy (the scalar head and tail beside the vector
// body): the CPU's answer, the lowest index among the largest values, NaNs
// never taken unless at index 0 (then 0).
TEST_F(CudaKernelsTest, CudaArgmaxWideRowTiesAndSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {kVocab, kVocab - 1}) {
    constexpr int64_t kRows = 8;
    std::vector<float> v(static_cast<size_t>(kRows * n), 0.0f);
    auto at = [&](int64_t r, int64_t i) -> float& { return v[static_cast<size_t>(r * n + i)]; };
    std::mt19937 gen(static_cast<uint32_t>(n));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& f : v) f = dist(gen);
    std::vector<int32_t> want(kRows);
    for (int64_t i = 0; i < n; ++i) at(0, i) = 0.5f;  // all equal
    want[0] = 0;
    at(1, 32768) = 2.0f, at(1, 28672) = 2.0f, at(1, n - 1) = 2.0f;  // ties in different blocks
    want[1] = 28672;
    at(2, n - 1) = 3.0f;  // the last element
    want[2] = static_cast<int32_t>(n - 1);
    at(3, 0) = nan, at(3, 5000) = 4.0f;  // NaN first: the CPU keeps index 0
    want[3] = 0;
    at(4, 100) = nan, at(4, 50000) = nan, at(4, 70000) = 5.0f, at(4, 140000) = nan;
    want[4] = 70000;
    at(5, 9999) = inf, at(5, 140000) = inf, at(5, 3) = nan;
    want[5] = 9999;
    for (int64_t i = 0; i < n; ++i) at(6, i) = -inf;
    want[6] = 0;
    at(7, 8191) = 1.5f, at(7, 8192) = 1.5f, at(7, 4096 * 8 + 1) = 1.5f;  // neighbours across a block edge
    want[7] = 8191;
    const Tensor x = Tensor::FromFloats(v, {kRows, n}, DType::kF32);
    const Tensor out = Tensor::Empty({kRows}, DType::kI32, Device::CPU());
    ASSERT_TRUE(Argmax(x, out).ok());
    EXPECT_EQ(HostInts(out), want) << "CPU, n " << n;
    const Tensor gout = PoisonedIndexGpu({kRows});
    ASSERT_TRUE(Argmax(OnGpu(x), gout).ok());
    EXPECT_EQ(ToInts(gout), want) << "n " << n;
    const Tensor gmis = PoisonedIndexGpu({kRows});
    ASSERT_TRUE(Argmax(MisalignedGpuCopy(x), gmis).ok());
    EXPECT_EQ(ToInts(gmis), want) << "misaligned, n " << n;
    // The same rows in bf16 (0.5, 1.5, 2.0, ... are exact): the 16-bit vector path.
    const Tensor xb = Tensor::FromFloats(v, {kRows, n}, DType::kBF16);
    const Tensor bout = Tensor::Empty({kRows}, DType::kI32, Device::CPU());
    ASSERT_TRUE(Argmax(xb, bout).ok());
    const Tensor gbout = PoisonedIndexGpu({kRows});
    ASSERT_TRUE(Argmax(OnGpu(xb), gbout).ok());
    EXPECT_EQ(ToInts(gbout), HostInts(bout)) << "bf16, n " << n;
  }
}

TEST_F(CudaKernelsTest, CudaTopKOverVocabularyMatchesCpu) {
  const Tensor x = DistinctRows(3, kVocab, DType::kF32, 4);
  for (int64_t k : {int64_t{50}, int64_t{20000}}) {  // 20000 > one sorted chunk
    const Tensor values = PoisonedHost({3, k}, DType::kF32);
    const Tensor indices = Tensor::Empty({3, k}, DType::kI32, Device::CPU());
    ASSERT_TRUE(TopK(x, k, values, indices).ok());
    const Tensor gvalues = PoisonedGpu({3, k}, DType::kF32);
    const Tensor gindices = PoisonedIndexGpu({3, k});
    ASSERT_TRUE(TopK(OnGpu(x), k, gvalues, gindices).ok());
    ExpectClose(gvalues, values, kExact, "values");
    EXPECT_EQ(ToInts(gindices), HostInts(indices)) << "k = " << k;
  }
}

// ---- sampling -------------------------------------------------------------------------------

std::vector<int32_t> SampleCpu(const Tensor& logits, const SamplingParams& p, const Tensor& steps) {
  const Tensor out = Tensor::Empty({logits.dim(0)}, DType::kI32, Device::CPU());
  EXPECT_TRUE(Sample(logits, p, steps, out).ok());
  return HostInts(out);
}

std::vector<int32_t> SampleGpu(const Tensor& logits, const SamplingParams& p, const Tensor& steps) {
  const Tensor gout = PoisonedIndexGpu({logits.dim(0)});
  const absl::Status s = Sample(logits, p, OnGpu(steps), gout);
  EXPECT_TRUE(s.ok()) << s;
  return ToInts(gout);
}

TEST_F(CudaKernelsTest, CudaSampleMatchesCpuTokens) {
  constexpr int64_t kRows = 4;
  const Tensor steps = Tensor::FromInts({0, 7, 123, 99999}, {kRows});
  struct Setting {
    float temperature;
    int32_t top_k;
    float top_p;
    uint64_t seed;
  };
  const Setting settings[] = {
      {1.0f, 0, 1.0f, 1},   {0.7f, 50, 1.0f, 2},   {0.7f, 50, 0.9f, 3},  {1.3f, 0, 0.95f, 4},
      {0.5f, 1, 1.0f, 5},   {1.0f, 20000, 0.8f, 6}, {2.0f, 0, 0.5f, 7},  {0.9f, 5, 0.3f, 8},
  };
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    // bf16 rows of the distinct-value construction still hold exact ties after rounding: the lower index decides.
    const Tensor logits = DistinctRows(kRows, kVocab, dtype, 5, 12.0f);
    const Tensor glogits = OnGpu(logits);
    for (const Setting& s : settings) {
      const SamplingParams p{s.temperature, s.top_k, s.top_p, s.seed};
      EXPECT_EQ(SampleGpu(glogits, p, steps), SampleCpu(logits, p, steps))
          << DTypeName(dtype) << " temperature " << s.temperature << " top_k " << s.top_k << " top_p " << s.top_p
          << " seed " << s.seed;
    }
  }
}

TEST_F(CudaKernelsTest, CudaSampleSmallRowsMatchCpu) {
  const Tensor steps = Tensor::FromInts({3, 1, 4, 1, 5, 9, 2}, {7});
  for (int64_t n : {int64_t{1}, int64_t{95}, int64_t{4099}}) {
    const Tensor logits = DistinctRows(7, n, DType::kF32, 6, 6.0f);
    for (uint64_t seed : {11u, 12u, 13u}) {
      const SamplingParams p{0.8f, n > 10 ? 10 : 0, 0.9f, seed};
      EXPECT_EQ(SampleGpu(OnGpu(logits), p, steps), SampleCpu(logits, p, steps)) << "n " << n << " seed " << seed;
    }
  }
}

TEST_F(CudaKernelsTest, CudaSampleGreedyIsArgmax) {
  const Tensor logits = DistinctRows(5, kVocab, DType::kBF16, 7);
  const Tensor glogits = OnGpu(logits);
  const Tensor steps = Tensor::FromInts({0, 1, 2, 3, 4}, {5});
  const Tensor argmax = PoisonedIndexGpu({5});
  ASSERT_TRUE(Argmax(glogits, argmax).ok());
  const SamplingParams greedy{0.0f, 0, 1.0f, 42};
  EXPECT_EQ(SampleGpu(glogits, greedy, steps), ToInts(argmax));
  EXPECT_EQ(ToInts(argmax), SampleCpu(logits, greedy, steps));
  // f32 and an odd width (the scalar path of the wide argmax).
  const Tensor odd = DistinctRows(5, kVocab - 3, DType::kF32, 17);
  const Tensor odd_argmax = PoisonedIndexGpu({5});
  ASSERT_TRUE(Argmax(OnGpu(odd), odd_argmax).ok());
  EXPECT_EQ(SampleGpu(OnGpu(odd), greedy, steps), ToInts(odd_argmax));
  EXPECT_EQ(ToInts(odd_argmax), SampleCpu(odd, greedy, steps));
}

// Same (seed, step) → same token, run after run.
TEST_F(CudaKernelsTest, CudaSampleIsDeterministic) {
  const Tensor glogits = OnGpu(DistinctRows(3, kVocab, DType::kF32, 8));
  const Tensor steps = Tensor::FromInts({5, 6, 7}, {3});
  const SamplingParams p{1.0f, 0, 0.9f, 77};
  const std::vector<int32_t> first = SampleGpu(glogits, p, steps);
  EXPECT_EQ(SampleGpu(glogits, p, steps), first);
}

// ---- mixture of experts ------------------------------------------------------------------------

class CudaMoeRouteTest : public CudaKernelsTest,
                         public ::testing::WithParamInterface<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(CudaMoeRouteTest, MatchesCpu) {
  const auto& [dtype, rows, experts] = GetParam();
  const Tensor logits = DistinctRows(rows, experts, dtype, 9, 8.0f);
  for (int64_t top_k : {int64_t{1}, int64_t{2}, int64_t{8}}) {
    if (top_k > experts) continue;
    for (bool renormalize : {false, true}) {
      const Tensor weights = PoisonedHost({rows, top_k}, DType::kF32);
      const Tensor ids = Tensor::Empty({rows, top_k}, DType::kI32, Device::CPU());
      ASSERT_TRUE(MoeRoute(logits, top_k, renormalize, weights, ids).ok());
      const Tensor gweights = PoisonedGpu({rows, top_k}, DType::kF32);
      const Tensor gids = PoisonedIndexGpu({rows, top_k});
      const absl::Status s = MoeRoute(OnGpu(logits), top_k, renormalize, gweights, gids);
      ASSERT_TRUE(s.ok()) << s;
      const std::string what = "top_k " + std::to_string(top_k) + (renormalize ? " renormalized" : "");
      // Same fp32 operations in the same order (sequential sums, correctly rounded exp): ~identical.
      ExpectClose(gweights, weights, ToleranceFor(DType::kF32), what);
      EXPECT_EQ(ToInts(gids), HostInts(ids)) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaMoeRouteTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 7, 130),
                                            ::testing::Values<int64_t>(8, 60, 128, 256)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int64_t, int64_t>>& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "x" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST_F(CudaKernelsTest, CudaMoeRouteTiesGoToLowerIndex) {
  const Tensor logits = Tensor::FromFloats({0.f, 2.f, 1.f, 2.f, 2.f, 0.f, 1.f, 0.f}, {1, 8}, DType::kF32);
  const Tensor gweights = PoisonedGpu({1, 3}, DType::kF32);
  const Tensor gids = PoisonedIndexGpu({1, 3});
  ASSERT_TRUE(MoeRoute(OnGpu(logits), 3, true, gweights, gids).ok());
  EXPECT_EQ(ToInts(gids), (std::vector<int32_t>{1, 3, 4}));
}

class CudaRowMoveTest : public CudaKernelsTest, public ::testing::WithParamInterface<std::tuple<DType, int64_t>> {};

TEST_P(CudaRowMoveTest, GatherRowsMatchesCpu) {
  const auto& [dtype, hidden] = GetParam();
  const Tensor x = Random({50, hidden}, dtype, 10);
  const Tensor rows = Tensor::FromInts({3, 0, 49, 3, 17, 22, 8}, {7});
  const Tensor out = PoisonedHost({7, hidden}, dtype);
  ASSERT_TRUE(GatherRows(x, rows, out).ok());
  const Tensor gout = PoisonedGpu({7, hidden}, dtype);
  ASSERT_TRUE(GatherRows(OnGpu(x), OnGpu(rows), gout).ok());
  ExpectClose(gout, out, kExact, "gather");
  // Misaligned operands take the narrow copy path.
  const Tensor gmis = MisalignedGpuCopy(PoisonedHost({7, hidden}, dtype));
  ASSERT_TRUE(GatherRows(MisalignedGpuCopy(x), OnGpu(rows), gmis).ok());
  ExpectClose(gmis, out, kExact, "gather, misaligned");
}

TEST_P(CudaRowMoveTest, GatherRowsZeroesOutOfRangeRows) {
  const auto& [dtype, hidden] = GetParam();
  const Tensor x = Random({4, hidden}, dtype, 11);
  const Tensor gout = PoisonedGpu({3, hidden}, dtype);
  ASSERT_TRUE(GatherRows(OnGpu(x), OnGpu(Tensor::FromInts({1, 4, -1}, {3})), gout).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = gout.To(Device::CPU())->ToFloats();
  const std::vector<float> want = x.ToFloats();
  for (int64_t c = 0; c < hidden; ++c) {
    EXPECT_EQ(got[c], want[hidden + c]);
    EXPECT_EQ(got[hidden + c], 0.0f);
    EXPECT_EQ(got[2 * hidden + c], 0.0f);
  }
}

TEST_P(CudaRowMoveTest, ScatterAddRowsMatchesCpu) {
  const auto& [dtype, hidden] = GetParam();
  for (DType src_dtype : {dtype, DType::kF32}) {
    const Tensor dst = Random({40, hidden}, dtype, 12);
    const Tensor src = Random({6, hidden}, src_dtype, 13);
    const Tensor rows = Tensor::FromInts({39, 0, 7, 8, 21, 3}, {6});
    const Tensor weights = Tensor::FromFloats({0.5f, 0.25f, 1.0f, -0.75f, 0.125f, 2.0f}, {6}, DType::kF32);
    const Tensor gdst = OnGpu(dst);
    ASSERT_TRUE(ScatterAddRows(dst, src, rows, weights).ok());
    ASSERT_TRUE(ScatterAddRows(gdst, OnGpu(src), OnGpu(rows), OnGpu(weights)).ok());
    // Multiply then add in fp32, rounded once, on both sides: identical.
    ExpectClose(gdst, dst, kExact, std::string("dst += ") + DTypeName(src_dtype));
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaRowMoveTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 95, 1024)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int64_t>>& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace seam::kernels::cuda_test
