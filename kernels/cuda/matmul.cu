// Matmul on CUDA: out[M, N] = x[M, K] · w[N, K]ᵀ through cuBLASLt, a GEMV
// kernel for decode-sized M, or a simple tiled kernel.
//
// Design
// - Row-major out[M, N] is column-major outᵀ[N, M], so the cuBLASLt call is
//   the column-major GEMM outᵀ = w · xᵀ: A = w (K×N column-major, op T, ld
//   K), B = x (K×M column-major, op N, ld K), D = out (N×M, ld N).
// - Compute type CUBLAS_COMPUTE_32F (fp32 accumulation, no TF32 for f32
//   inputs, in every algorithm and split-K variant, so f32 results match the
//   full-fp32 CPU reference within its tolerance), scale fp32.
// - One decision per problem (M, N, K, dtypes, pointer alignments), GPU kind
//   and tuning setting in a process, made by the first thread to meet the
//   problem and adopted by every other; each (thread, device) keeps a plan
//   with its descriptors (matmul_plan.cuh). So a decode step does no
//   heuristic query nor timing after its first occurrence, and the same
//   problem runs the same kernel on every thread of a process (eager steps
//   and graph replays, TP ranks agree). The choice
//   (kernels/include/seam/kernels/matmul_tuning.h sets its knobs):
//   * M ≤ kGemvAnyWeightRows (2) and the GEMV's conditions: the GEMV
//     (matmul_gemv.cu), always; it needs no handle nor workspace, so it can
//     be captured even as a thread's first call.
//   * Otherwise, outside a graph capture and for M ≤ max_tuned_rows:
//     autotuned. cuBLASLt's heuristic proposes `candidates` algorithms;
//     they, split-K variants (2, 3, 4, 8 ways, fp32 partial sums in the
//     workspace) of its first pick, and the GEMV when M ≤ 8 meets its
//     conditions, run once untimed and timed_runs times between CUDA events
//     on the caller's stream (which this synchronises); the lowest median
//     wins, ties to the earlier (the heuristic's order). On an H200 the
//     heuristic's first pick for M = 64-256 at hidden 4096 ran at 1.6-2.1x
//     the weight bytes (bench/results/2026-12-02-h200-decode-attention), e.g.
//     64 output tiles for 132 SMs in the down projection.
//   * Inside a capture, with candidates = 1 or above max_tuned_rows: the
//     measured static rule (GemvByRule) for the GEMV, else the heuristic's
//     first pick. DecodeGraph's warm-up meets every shape before capturing.
//   * x and w of different dtypes (LongCat-Flash's fp32 router times a
//     16-bit activation) up to kMixedMaxRows rows: matmul_mixed.cu, K split
//     over a block's warps (on an H200 the tiled kernel below took ~260 us
//     for the 1 x 6144 x 96 router of a batch-1 decode step, a quarter of
//     the step; bench/results/2026-12-03-h200-longcat-kernels).
//   * Other pairings cuBLASLt has no kernel for (f32 inputs with a 16-bit
//     out, bf16 inputs with f16 out, larger mixed M): the tiled fp32
//     fallback kernel below, correct for every pairing, not tuned for speed.
//   Different algorithms sum in different orders: a bf16 or f16 result may
//   differ by a rounding (one storage ulp) between processes that chose
//   differently; an f32 result by fp32 rounding. Within a process the bits
//   repeat; processes that must agree bit for bit (a pipeline split against
//   no split in bf16) set candidates to 1, the heuristic's deterministic pick.
// - One cuBLASLt handle per (thread, device), created with its first cuBLASLt
//   plan together with a fixed 32 MiB workspace (streams that run matmuls at
//   the same time as another stream of the thread get their own:
//   UseOwnMatmulWorkspace). The first cuBLASLt problem on a thread/device
//   therefore allocates: run one matmul (warm-up) before capturing a CUDA
//   graph. Later calls never allocate nor synchronise, so they can be captured.
#include <cublasLt.h>

#include <cstdint>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "matmul_gemv.cuh"
#include "matmul_mixed.cuh"
#include "matmul_plan.cuh"

namespace seam::kernels::cuda {
namespace {

// ---- fallback kernel ----------------------------------------------------------------

constexpr int kTile = 16;

// out[m, n] = Σ_k x[m, k] · w[n, k] in fp32; one thread per output, 16×16
// tiles of x and w staged in shared memory. blockIdx.x covers N, blockIdx.y M.
template <typename X, typename W, typename O>
__global__ void __launch_bounds__(kTile* kTile)
    FallbackMatmulKernel(const X* __restrict__ x, const W* __restrict__ w, O* __restrict__ out, int64_t m,
                         int64_t n, int64_t k) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + ty;  // of x / out
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;  // of w / out
  const int64_t w_row = static_cast<int64_t>(blockIdx.x) * kTile + ty;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    const int64_t kk = k0 + tx;
    xs[ty][tx] = row < m && kk < k ? ToFloat(x[row * k + kk]) : 0.f;
    ws[ty][tx] = w_row < n && kk < k ? ToFloat(w[w_row * k + kk]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; ++j) acc += xs[ty][j] * ws[tx][j];
    __syncthreads();
  }
  if (row < m && col < n) out[row * n + col] = FromFloat<O>(acc);
}

absl::Status LaunchFallback(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if ((m + kTile - 1) / kTile > 65535) {
    return absl::UnimplementedError(absl::StrCat("Matmul: the fallback kernel takes at most ", 65535 * kTile,
                                                 " rows, got ", m));
  }
  const dim3 grid(static_cast<unsigned int>((n + kTile - 1) / kTile), static_cast<unsigned int>((m + kTile - 1) / kTile));
  const dim3 block(kTile, kTile);
  return DispatchFloat3(x.dtype(), "x", w.dtype(), "w", out.dtype(), "out",
                        [&](auto xt, auto wt, auto ot) -> absl::Status {
                          using X = typename decltype(xt)::type;
                          using W = typename decltype(wt)::type;
                          using O = typename decltype(ot)::type;
                          FallbackMatmulKernel<X, W, O><<<grid, block, 0, stream>>>(
                              static_cast<const X*>(x.raw_data()), static_cast<const W*>(w.raw_data()),
                              static_cast<O*>(out.raw_data()), m, n, k);
                          SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
                          return absl::OkStatus();
                        });
}

}  // namespace

absl::Status UseOwnMatmulWorkspace(void* stream) {
  int device = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  LtState& state = StateFor(device);
  if (state.stream_workspaces.count(stream) != 0) return absl::OkStatus();
  void* w = nullptr;
  SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&w, kMatmulWorkspaceBytes));
  state.stream_workspaces.emplace(stream, w);
  return absl::OkStatus();
}

std::vector<MatmulChoice> MatmulChoicesOnThread() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  std::vector<MatmulChoice> choices;
  for (const Plan* plan : StateFor(device).order) choices.push_back(plan->choice);
  return choices;
}

absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "Matmul"));
  SEAM_RETURN_IF_ERROR(DispatchFloat(x.dtype(), "x", [](auto) { return absl::OkStatus(); }));
  SEAM_RETURN_IF_ERROR(DispatchFloat(w.dtype(), "w", [](auto) { return absl::OkStatus(); }));
  SEAM_RETURN_IF_ERROR(DispatchFloat(out.dtype(), "out", [](auto) { return absl::OkStatus(); }));
  const cudaStream_t stream = Stream();
  if (k == 0) {  // empty sum: zeros (all-zero bytes in every float dtype)
    SEAM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), stream));
    return absl::OkStatus();
  }
  constexpr int64_t kMaxDim = int64_t{1} << 31;
  if (m >= kMaxDim || n >= kMaxDim || k >= kMaxDim) {
    return absl::UnimplementedError(absl::StrCat("Matmul: dimensions must be below 2^31, got M=", m, " N=", n,
                                                 " K=", k));
  }

  LtState& state = StateFor(x.device().index);
  SEAM_ASSIGN_OR_RETURN(const Plan* plan, PlanFor(state, KeyOf(x, w, out), x, w, out, stream));
  switch (plan->kernel) {
    case MatmulKernel::kGemv:
      return LaunchGemv(x, w, out, stream);
    case MatmulKernel::kMixed:
      return LaunchMixed(x, w, out, stream);
    case MatmulKernel::kFallback:
      return LaunchFallback(x, w, out, stream);
    case MatmulKernel::kCublasLt:
      break;
  }
  const float alpha = 1.0f, beta = 0.0f;
  SEAM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(state.handle, plan->desc, &alpha, w.raw_data(), plan->a, x.raw_data(),
                                             plan->b, &beta, out.raw_data(), plan->d, out.raw_data(), plan->d,
                                             &plan->algo, state.WorkspaceFor(stream), kMatmulWorkspaceBytes, stream));
  return absl::OkStatus();
}

}  // namespace seam::kernels::cuda
