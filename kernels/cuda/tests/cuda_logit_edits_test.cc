// CUDA EditLogits and TokenLogProbs against the CPU reference. EditLogits
// must give the same bits (both round each operation alike), and a seeded
// draw after the same edits the same token on both devices; TokenLogProbs
// within 1e-5 absolute (fp32 sums in a block tree against a sequential sum).
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

constexpr int64_t kVocab = 151936;

std::vector<int32_t> GpuInts(const Tensor& t) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  absl::StatusOr<Tensor> host = t.To(Device::CPU());
  EXPECT_TRUE(host.ok()) << host.status();
  return std::vector<int32_t>(host->data<int32_t>(), host->data<int32_t>() + host->numel());
}

// Penalty-shaped edits over `rows` rows: distinct tokens per row, repetition
// 1.3 on some, offsets of frequency/presence/bias size, a few masks.
void MakeEdits(int64_t rows, int64_t n, uint32_t seed, Tensor* at, Tensor* by) {
  std::mt19937 gen(seed);
  std::vector<int32_t> where;
  std::vector<float> how;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    std::iota(tokens.begin(), tokens.end(), 0);
    std::shuffle(tokens.begin(), tokens.end(), gen);
    for (int e = 0; e < 300; ++e) {
      where.push_back(static_cast<int32_t>(r));
      where.push_back(tokens[static_cast<size_t>(e)]);
      how.push_back(e % 3 == 0 ? 1.3f : 1.0f);
      how.push_back(e % 50 == 0 ? -std::numeric_limits<float>::infinity() : 0.37f * static_cast<float>(e % 7) - 1.1f);
    }
  }
  const int64_t edits = static_cast<int64_t>(how.size() / 2);
  *at = Tensor::FromInts(where, {edits, 2});
  *by = Tensor::FromFloats(how, {edits, 2});
}

TEST_F(CudaKernelsTest, CudaEditLogitsGivesTheCpuBits) {
  const Tensor logits = Random({4, kVocab}, DType::kF32, 31, -8.0f, 8.0f);
  Tensor at, by;
  MakeEdits(4, kVocab, 32, &at, &by);
  const Tensor cpu = logits.Clone();
  ASSERT_TRUE(EditLogits(cpu, at, by).ok());
  const Tensor gpu = OnGpu(logits);
  ASSERT_TRUE(EditLogits(gpu, OnGpu(at), OnGpu(by)).ok());
  ExpectClose(gpu, cpu, kExact, "edited logits");
}

TEST_F(CudaKernelsTest, CudaDrawAfterEditsIsTheCpuDraw) {
  const Tensor logits = Random({4, kVocab}, DType::kF32, 33, -4.0f, 4.0f);
  Tensor at, by;
  MakeEdits(4, kVocab, 34, &at, &by);
  const Tensor cpu = logits.Clone();
  ASSERT_TRUE(EditLogits(cpu, at, by).ok());
  const Tensor gpu = OnGpu(logits);
  ASSERT_TRUE(EditLogits(gpu, OnGpu(at), OnGpu(by)).ok());
  const Tensor steps = Tensor::FromInts({0, 1, 2, 3}, {4});
  for (uint64_t seed : {1u, 2u, 3u}) {
    const SamplingParams p{0.9f, 40, 0.95f, seed};
    const Tensor out = Tensor::Empty({4}, DType::kI32);
    ASSERT_TRUE(Sample(cpu, p, steps, out).ok());
    Tensor gout = Tensor::Empty({4}, DType::kI32, Gpu());
    ASSERT_TRUE(Sample(gpu, p, OnGpu(steps), gout).ok());
    EXPECT_EQ(GpuInts(gout), std::vector<int32_t>(out.data<int32_t>(), out.data<int32_t>() + 4)) << "seed " << seed;
  }
}

TEST_F(CudaKernelsTest, CudaTokenLogProbsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor logits = Random({3, kVocab}, dtype, 35, -10.0f, 10.0f);
    const Tensor tokens = Tensor::FromInts({0, 1, kVocab - 1, 5, 77, 151000, 9, 9, 1234}, {3, 3});
    const Tensor out = Tensor::Empty({3, 3}, DType::kF32);
    ASSERT_TRUE(TokenLogProbs(logits, tokens, out).ok());
    const Tensor gout = PoisonedGpu({3, 3}, DType::kF32);
    ASSERT_TRUE(TokenLogProbs(OnGpu(logits), OnGpu(tokens), gout).ok());
    // The kernel sums exp over the vocabulary in fp32 (in its own order), the
    // host in double: the log-sum-exp agrees to ~6e-6 of the log-probs'
    // magnitude (1.1e-4 at -18.5 on an H200).
    ExpectClose(gout, out, Tolerance{1e-5f, 1e-5f}, std::string("log-probs ") + DTypeName(dtype));
  }
}

}  // namespace
}  // namespace seam::kernels::cuda_test
