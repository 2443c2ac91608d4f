// CUDA Argmax against the CPU's on random logits with many exact ties (small
// integers, so the lower-index rule decides), NaNs inside rows and at index 0,
// infinities, all-equal rows, at decode shapes (batch 1-256 x 32000, one
// vocabulary-wide row of 151936), row lengths that are no multiple of the
// vector width (row starts off the 16-byte boundary), and misaligned copies.
// Indices must be identical: the CPU's answer is the first largest value, NaNs
// never taken, 0 when element 0 is NaN.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda_test {
namespace {

// Integers in [-40, 40] (exact in every float dtype), then per row: row 1 mod
// 7 has NaN at element 0, rows 2 and 3 mod 7 NaNs scattered, row 4 mod 7 is
// all -inf but a +inf pair, row 5 mod 7 all equal; the others plain.
std::vector<float> TiedLogits(int64_t rows, int64_t n, uint32_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> value(-40, 40);
  std::uniform_int_distribution<int64_t> at(0, n - 1);
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (float& f : v) f = static_cast<float>(value(gen));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = v.data() + r * n;
    switch (r % 7) {
      case 1:
        row[0] = nan;
        break;
      case 2:
      case 3:
        for (int i = 0; i < 5; ++i) row[at(gen)] = nan;
        break;
      case 4:
        for (int64_t i = 0; i < n; ++i) row[i] = -inf;
        row[at(gen)] = inf, row[at(gen)] = inf;
        break;
      case 5:
        for (int64_t i = 0; i < n; ++i) row[i] = 3.0f;
        break;
      default:
        break;
    }
  }
  return v;
}

std::vector<int32_t> Download(const Tensor& t) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  absl::StatusOr<Tensor> host = t.To(Device::CPU());
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return {};
  return std::vector<int32_t>(host->data<int32_t>(), host->data<int32_t>() + host->numel());
}

Tensor PoisonedIndices(int64_t rows) {
  Tensor t = Tensor::Empty({rows}, DType::kI32, Gpu());
  EXPECT_EQ(cudaMemset(t.raw_data(), 0xFF, t.nbytes()), cudaSuccess);
  return t;
}

using ArgmaxParam = std::tuple<DType, int64_t, int64_t>;  // dtype, rows, n
class CudaArgmaxTiesTest : public CudaKernelsTest, public ::testing::WithParamInterface<ArgmaxParam> {};

TEST_P(CudaArgmaxTiesTest, MatchesCpu) {
  const auto& [dtype, rows, n] = GetParam();
  const Tensor x = Tensor::FromFloats(TiedLogits(rows, n, static_cast<uint32_t>(rows * 31 + n)), {rows, n}, dtype);
  const Tensor want = Tensor::Empty({rows}, DType::kI32, Device::CPU());
  ASSERT_TRUE(Argmax(x, want).ok());
  const std::vector<int32_t> expected(want.data<int32_t>(), want.data<int32_t>() + rows);
  const Tensor got = PoisonedIndices(rows);
  ASSERT_TRUE(Argmax(OnGpu(x), got).ok());
  EXPECT_EQ(Download(got), expected) << "aligned";
  const Tensor got_mis = PoisonedIndices(rows);
  ASSERT_TRUE(Argmax(MisalignedGpuCopy(x), got_mis).ok());
  EXPECT_EQ(Download(got_mis), expected) << "one element past a 16-byte boundary";
}

std::string ArgmaxName(const ::testing::TestParamInfo<ArgmaxParam>& info) {
  const auto& [dtype, rows, n] = info.param;
  return std::string(DTypeName(dtype)) + "_" + std::to_string(rows) + "x" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(DecodeShapes, CudaArgmaxTiesTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                                            ::testing::Values<int64_t>(1, 7, 64, 256),
                                            ::testing::Values<int64_t>(32000, 151936)),
                         ArgmaxName);

INSTANTIATE_TEST_SUITE_P(OddShapes, CudaArgmaxTiesTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(3, 300),
                                            ::testing::Values<int64_t>(1, 5, 9, 4099, 100003)),
                         ArgmaxName);

// The same logits give the same indices inside a CUDA graph (the cluster
// launch is captured) as eagerly.
TEST_F(CudaKernelsTest, CudaArgmaxReplaysFromGraph) {
  constexpr int64_t kRows = 256, kN = 32000;
  const Tensor x = Tensor::FromFloats(TiedLogits(kRows, kN, 9), {kRows, kN}, DType::kF32);
  const Tensor want = Tensor::Empty({kRows}, DType::kI32, Device::CPU());
  ASSERT_TRUE(Argmax(x, want).ok());
  const std::vector<int32_t> expected(want.data<int32_t>(), want.data<int32_t>() + kRows);
  const Tensor gx = OnGpu(x);
  const Tensor got = PoisonedIndices(kRows);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    ScopedStream scoped(stream);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const absl::Status status = Argmax(gx, got);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(status.ok()) << status;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(Download(got), expected);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace seam::kernels::cuda_test
