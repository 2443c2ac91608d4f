// Matmul's per-problem choice (seam/kernels/matmul_tuning.h): the autotuned
// kernel against the heuristic's first pick, the choice kept per thread, and
// a problem first met inside a graph capture.
//
// Decisions are kept per process and tuning setting (and plans per thread),
// so each configuration runs in a fresh thread under its own setting; a
// second thread under the same setting adopts the first one's decision.
//
// Tolerance between the two choices: both accumulate in fp32 (no TF32), but
// different algorithms (tile shapes, split-K with fp32 partial sums, the GEMV)
// sum in different orders. f32 outputs agree to ~1e-5 relative with a floor of
// 1e-4 for cancellation over K ≤ 4096 terms of magnitude ≤ 1 (as the CPU
// comparison of cuda_matmul_test.cc); bf16 outputs are each side's fp32 value
// rounded once, and fp32 differences of a few ulps can flip that rounding: one
// storage ulp (1/128 relative) with a floor of 4e-3. Bits are not promised
// equal across algorithms; within one thread the same problem repeats its bits.
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/matmul_tuning.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda_test {
namespace {

// Two algorithms sum the K products in different orders (split-K adds fp32
// partial sums): in fp32 each order's error is up to about K·2^-24 of the sum
// of |products| (2.4e-4 at K 4096), so f32 outputs agree to 5e-4 relative
// (measured on an H200: 6.5e-5 with split-K 3); bf16 outputs to one storage
// ulp (2^-7) after rounding.
Tolerance ChoiceTolerance(DType out) { return out == DType::kF32 ? Tolerance{5e-4f, 5e-4f} : Tolerance{1.0f / 128, 4e-3f}; }

// Runs `body` on a fresh thread (fresh plans) under `tuning`, restoring the previous setting after.
void OnFreshThread(const MatmulTuning& tuning, const std::function<void()>& body) {
  const MatmulTuning previous = GetMatmulTuning();
  ASSERT_TRUE(SetMatmulTuning(tuning).ok());
  std::thread t([&] {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    body();
  });
  t.join();
  ASSERT_TRUE(SetMatmulTuning(previous).ok());
}

MatmulTuning HeuristicOnly() {
  MatmulTuning t;
  t.candidates = 1;
  return t;
}

MatmulTuning Autotuned() {
  MatmulTuning t;
  t.candidates = 16;
  return t;
}

// The kept choice of the thread's problem (m, n, k); fails when absent.
MatmulChoice ChoiceOf(int64_t m, int64_t n, int64_t k) {
  for (const MatmulChoice& c : MatmulChoices()) {
    if (c.m == m && c.n == n && c.k == k) return c;
  }
  ADD_FAILURE() << "no choice recorded for " << m << "x" << n << "x" << k;
  return MatmulChoice{};
}

// (operand dtype, out dtype, M, K, N): decode batches 3-256 at decode-like widths.
using ChoiceParam = std::tuple<DType, DType, int64_t, int64_t, int64_t>;
class CudaMatmulChoiceTest : public CudaKernelsTest, public ::testing::WithParamInterface<ChoiceParam> {};

TEST_P(CudaMatmulChoiceTest, AutotunedMatchesHeuristicPick) {
  const auto& [in, out_dtype, m, k, n] = GetParam();
  const std::string what = std::string(DTypeName(in)) + "->" + DTypeName(out_dtype) + " " + std::to_string(m) + "x" +
                           std::to_string(k) + "x" + std::to_string(n);
  const Tensor x = OnGpu(Random({m, k}, in, static_cast<uint32_t>(m + k)));
  const Tensor w = OnGpu(Random({n, k}, in, static_cast<uint32_t>(n + 7)));
  const Tensor heuristic = PoisonedGpu({m, n}, out_dtype);
  const Tensor tuned = PoisonedGpu({m, n}, out_dtype);
  const Tensor again = PoisonedGpu({m, n}, out_dtype);
  OnFreshThread(HeuristicOnly(), [&] {
    ASSERT_TRUE(Matmul(x, w, heuristic).ok());
    const MatmulChoice c = ChoiceOf(m, n, k);
    EXPECT_EQ(c.timed, 0) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  MatmulChoice kept;
  OnFreshThread(Autotuned(), [&] {
    ASSERT_TRUE(Matmul(x, w, tuned).ok());
    ASSERT_TRUE(Matmul(x, w, again).ok());  // from the kept plan
    kept = ChoiceOf(m, n, k);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  // M ≤ 2 takes the GEMV untimed; above it every cuBLASLt candidate is
  // timed. Dtype pairs whose first pick is not cuBLASLt's (f32 operands with
  // a bf16 out: the GEMV or the fallback) keep that pick untimed.
  if (m > 2 && kept.kernel == "cublaslt") {
    EXPECT_GE(kept.timed, 1) << what;
    EXPECT_GE(kept.kept, 0) << what;
    EXPECT_LE(kept.kept_us, kept.first_us) << what << ": the kept candidate is the fastest timed";
  }
  const absl::StatusOr<Tensor> host_heuristic = heuristic.To(Device::CPU());
  ASSERT_TRUE(host_heuristic.ok());
  ExpectClose(tuned, *host_heuristic, ChoiceTolerance(out_dtype), what + " (" + kept.kernel + " " + kept.algorithm + ")");
  const absl::StatusOr<Tensor> host_tuned = tuned.To(Device::CPU());
  ASSERT_TRUE(host_tuned.ok());
  ExpectClose(again, *host_tuned, kExact, what + ": second call");
}

std::string ChoiceName(const ::testing::TestParamInfo<ChoiceParam>& info) {
  const auto& [in, out, m, k, n] = info.param;
  return std::string(DTypeName(in)) + "_to_" + DTypeName(out) + "_" + std::to_string(m) + "x" + std::to_string(k) +
         "x" + std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(Decode, CudaMatmulChoiceTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(2, 3, 8, 16, 64, 256),
                                            ::testing::Values<int64_t>(1024, 4096),
                                            ::testing::Values<int64_t>(3072)),
                         ChoiceName);

// A problem timed by one thread runs the same kernel, with the same bits, on
// every other thread of the process (TP ranks, graph and eager callers).
TEST_F(CudaKernelsTest, CudaMatmulDecisionIsSharedByThreads) {
  const Tensor x = OnGpu(Random({48, 2048}, DType::kBF16, 51));
  const Tensor w = OnGpu(Random({1536, 2048}, DType::kBF16, 52));
  const Tensor first = PoisonedGpu({48, 1536}, DType::kBF16);
  const Tensor second = PoisonedGpu({48, 1536}, DType::kBF16);
  MatmulChoice a, b;
  OnFreshThread(Autotuned(), [&] {
    ASSERT_TRUE(Matmul(x, w, first).ok());
    a = ChoiceOf(48, 1536, 2048);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  OnFreshThread(Autotuned(), [&] {
    ASSERT_TRUE(Matmul(x, w, second).ok());
    b = ChoiceOf(48, 1536, 2048);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
  EXPECT_GE(a.timed, 1);
  EXPECT_EQ(a.kernel, b.kernel);
  EXPECT_EQ(a.algorithm, b.algorithm);
  EXPECT_EQ(a.kept_us, b.kept_us) << "the second thread adopted the first one's decision, not timed its own";
  const absl::StatusOr<Tensor> host = first.To(Device::CPU());
  ASSERT_TRUE(host.ok());
  ExpectClose(second, *host, kExact, "second thread");
}

// Above max_tuned_rows nothing is timed.
TEST_F(CudaKernelsTest, CudaMatmulAboveMaxTunedRowsIsNotTimed) {
  const Tensor x = OnGpu(Random({96, 512}, DType::kBF16, 41));
  const Tensor w = OnGpu(Random({1024, 512}, DType::kBF16, 42));
  const Tensor out = PoisonedGpu({96, 1024}, DType::kBF16);
  MatmulTuning tuning;
  tuning.max_tuned_rows = 64;
  OnFreshThread(tuning, [&] {
    ASSERT_TRUE(Matmul(x, w, out).ok());
    EXPECT_EQ(ChoiceOf(96, 1024, 512).timed, 0);
    EXPECT_EQ(ChoiceOf(96, 1024, 512).kernel, "cublaslt");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
}

// A problem first met inside a capture keeps the heuristic's first pick,
// untimed (nothing synchronises inside the capture), and replays correctly;
// after the capture the same problem eagerly uses the same plan.
TEST_F(CudaKernelsTest, CudaMatmulFirstMetInCaptureIsNotTimed) {
  const Tensor xh = Random({37, 512}, DType::kBF16, 43), wh = Random({776, 512}, DType::kBF16, 44);
  const Tensor want = PoisonedHost({37, 776}, DType::kF32);
  ASSERT_TRUE(Matmul(xh, wh, want).ok());
  const Tensor x = OnGpu(xh), w = OnGpu(wh);
  const Tensor warm_x = OnGpu(Random({16, 64}, DType::kBF16, 45)), warm_w = OnGpu(Random({64, 64}, DType::kBF16, 46));
  const Tensor warm_out = PoisonedGpu({16, 64}, DType::kF32);
  const Tensor out = PoisonedGpu({37, 776}, DType::kF32);
  OnFreshThread(Autotuned(), [&] {
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    {
      ScopedStream scoped(stream);
      ASSERT_TRUE(Matmul(warm_x, warm_w, warm_out).ok());  // the thread's handle and workspace
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      const absl::Status status = Matmul(x, w, out);
      ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      ASSERT_TRUE(status.ok()) << status;
      const MatmulChoice c = ChoiceOf(37, 776, 512);
      EXPECT_EQ(c.timed, 0);
      EXPECT_EQ(c.kernel, "cublaslt");
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      ExpectClose(out, want, ChoiceTolerance(DType::kF32), "replayed");
      const absl::StatusOr<Tensor> replayed = out.To(Device::CPU());
      ASSERT_TRUE(replayed.ok());
      ASSERT_EQ(cudaMemsetAsync(out.raw_data(), 0xFF, out.nbytes(), stream), cudaSuccess);
      ASSERT_TRUE(Matmul(x, w, out).ok());
      EXPECT_EQ(ChoiceOf(37, 776, 512).timed, 0) << "the plan made in the capture is kept";
      ExpectClose(out, *replayed, kExact, "eager after the capture");
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    cudaStreamDestroy(stream);
  });
}

// Runs without a GPU: the setting is validated before anything is chosen.
TEST(MatmulTuningSetting, RefusesOutOfRangeSettingsByName) {
  MatmulTuning t;
  t.candidates = 0;
  absl::Status s = SetMatmulTuning(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates"), std::string::npos) << s;
  t = MatmulTuning{};
  t.timed_runs = 0;
  s = SetMatmulTuning(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("timed_runs"), std::string::npos) << s;
  t = MatmulTuning{};
  t.max_tuned_rows = -1;
  s = SetMatmulTuning(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_tuned_rows"), std::string::npos) << s;
  EXPECT_EQ(GetMatmulTuning().candidates, MatmulTuning{}.candidates) << "a refused setting changes nothing";
}

}  // namespace
}  // namespace seam::kernels::cuda_test
