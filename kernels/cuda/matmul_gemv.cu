// The GEMV kernel of Matmul for decode-sized M (x[M, K] · w[N, K]ᵀ, M ≤
// kGemvMaxRows); internal to kernels/cuda, chosen by matmul.cu.
//
// cuBLASLt's heuristic picks split-K kernels with an extra reduction for
// decode-sized problems (7-10 µs for a 1024×1024 bf16 weight that takes
// ~0.5 µs to read). The weight read dominates and one read of w serves all M
// rows, so the kernel streams w once: each warp owns kGemvRowsPerWarp output
// features, its lanes load 16-byte slices of those weight rows (kGemvUnroll
// slices per row in flight per lane), multiply them with the matching slices
// of every x row (x is tiny: read through the read-only cache), accumulate in
// fp32 and reduce by warp shuffles. Conditions (GemvEligible): M ≤
// kGemvMaxRows, x and w of one dtype, K a multiple of the 16-byte vector
// width, x and w 16-byte aligned.
//
// Where matmul.cu does not time it against cuBLASLt, GemvByRule decides:
// every eligible problem up to kGemvAnyWeightRows rows; for very wide
// outputs (N > kGemvWideN, the lm_head) only M ≤ kGemvWideMaxRows, where the
// per-weight arithmetic (M FMAs plus conversions) stays well under the
// weight's streaming time; and from kGemvAnyWeightRows + 1 rows only
// weights under kGemvLargeWeightBytes: on an H200 cuBLASLt streamed the
// 33-262 MB weights of a hidden-4096 model faster from 3-4 rows on (at 8
// rows 1.5x faster for the attention's and the down projection's;
// 2026-12-01-h200-gemv-batch1/run5-matmul-choice), while its fixed cost
// still dominates small weights.
#include <cstdint>

#include "cuda_common.cuh"
#include "matmul_gemv.cuh"
#include "pdl_launch.cuh"
#include "warp_sum_store.cuh"

namespace seam::kernels::cuda {
namespace {

// ---- small-M kernel (GEMV) --------------------------------------------------------------

constexpr int kGemvWarps = 4;           // warps per block
constexpr int kGemvRowsPerWarp = 2;     // output features per warp (share each x load)
constexpr int kGemvUnroll = 4;          // 16-byte weight loads in flight per lane and feature
constexpr int64_t kGemvWideN = 16384;   // beyond this N ...
constexpr int kGemvWideMaxRows = 4;     // ... only M up to this takes the GEMV
// (kGemvAnyWeightRows: matmul_gemv.cuh) beyond that M ...
constexpr int64_t kGemvLargeWeightBytes = int64_t{16} << 20;  // ... weights this large go to cuBLASLt

// acc[r][m] += w_r[vector i] · x_m[vector i] for the vectors `wv` of the warp's features.
template <typename T, int M, int R>
__device__ __forceinline__ void GemvStep(const uint4 (&wv)[R], const uint4* __restrict__ x, int64_t kv, int64_t i,
                                         float (&acc)[R][M]) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  float wf[R][V];
#pragma unroll
  for (int r = 0; r < R; ++r) WidenVec<T>(wv[r], wf[r]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xf[V];
    WidenVec<T>(__ldg(x + m * kv + i), xf);
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[r][m] = fmaf(wf[r][j], xf[j], acc[r][m]);
    }
  }
}

// wv[u][r] = the lane's 16-byte vector u of the chunk at `base` (in vectors) of feature r's weight row.
template <int U, int R>
__device__ __forceinline__ void LoadChunk(uint4 (&wv)[U][R], const uint4* const* wrow, int64_t base, int lane) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int r = 0; r < R; ++r) wv[u][r] = __ldcs(wrow[r] + base + 32 * u + lane);
  }
}

// out[m, f] = Σ_k x[m, k] · w[f, k] for m < M, warp w taking features
// f = R·w .. R·w + R - 1. x, w: 16-byte aligned, k a multiple of the vector width.
template <typename T, typename O, int M>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(const T* __restrict__ x, const T* __restrict__ w, O* __restrict__ out, int64_t n, int64_t k) {
  constexpr int R = kGemvRowsPerWarp;
  constexpr int U = kGemvUnroll;
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32) * R;
  if (first >= n) {  // warp-uniform; no block-wide synchronisation follows
    PdlWait();  // every warp waits before it exits (pdl_launch.cuh)
    return;
  }
  const int64_t kv = k / V;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t f = first + r < n ? first + r : n - 1;  // past the end: reread the last row, not written
    wrow[r] = reinterpret_cast<const uint4*>(w + f * k);
  }
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;
  }
  int64_t base = 0;
  if constexpr (M == 1) {
    // One row: the first chunk's loads are issued ahead of the loop. On an
    // H200 this measured 7% faster per batch-1 decode step of an 8-layer
    // hidden-4096 bf16 Qwen3 (bench/results/2026-12-01-h200-gemv-batch1);
    // at M = 2 it measured slower, so more rows keep the plain loop.
    uint4 wv[U][R];
    if (32 * U <= kv) LoadChunk<U, R>(wv, wrow, 0, lane);
    // The weights are no kernel's output: their first chunk streams in while
    // the kernel before (which wrote x) drains (pdl_launch.cuh).
    PdlWait();
    PdlLaunchDependents();
    for (; base + 32 * U <= kv; base += 32 * U) {
      if (base > 0) LoadChunk<U, R>(wv, wrow, base, lane);
#pragma unroll
      for (int u = 0; u < U; ++u) GemvStep<T, M, R>(wv[u], xv, kv, base + 32 * u + lane, acc);
    }
  } else {
    PdlWait();  // x comes from the kernel before (pdl_launch.cuh)
    PdlLaunchDependents();
    for (; base + 32 * U <= kv; base += 32 * U) {
      uint4 wv[U][R];
      LoadChunk<U, R>(wv, wrow, base, lane);
#pragma unroll
      for (int u = 0; u < U; ++u) GemvStep<T, M, R>(wv[u], xv, kv, base + 32 * u + lane, acc);
    }
  }
  for (int64_t i = base + lane; i < kv; i += 32) {
    uint4 wv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wv[r] = __ldcs(wrow[r] + i);
    GemvStep<T, M, R>(wv, xv, kv, i, acc);
  }
  int64_t out_row[M];
#pragma unroll
  for (int m = 0; m < M; ++m) out_row[m] = m;
  WarpSumAndStore<O, M, R>(acc, out_row, first, n, lane, out);
}

}  // namespace

bool GemvEligible(const Tensor& x, const Tensor& w, int64_t m, int64_t k) {
  if (m > kGemvMaxRows || x.dtype() != w.dtype()) return false;
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kBF16 && x.dtype() != DType::kF16) return false;
  const int64_t vec = x.dtype() == DType::kF32 ? 4 : 8;
  return k % vec == 0 && reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.raw_data()) % 16 == 0;
}

bool GemvByRule(const Tensor& x, const Tensor& w, int64_t m, int64_t n, int64_t k) {
  if (!GemvEligible(x, w, m, k)) return false;
  if (n > kGemvWideN && m > kGemvWideMaxRows) return false;
  return m <= kGemvAnyWeightRows || static_cast<int64_t>(w.nbytes()) < kGemvLargeWeightBytes;
}

namespace {

template <typename T, typename O, int M>
absl::Status LaunchGemvRows(const T* x, const T* w, O* out, int64_t n, int64_t k, cudaStream_t stream) {
  constexpr int64_t kPerBlock = int64_t{kGemvWarps} * kGemvRowsPerWarp;
  const unsigned int blocks = static_cast<unsigned int>((n + kPerBlock - 1) / kPerBlock);
  return LaunchEnrolled({dim3(blocks), dim3(kGemvWarps * 32), 0, stream}, GemvKernel<T, O, M>, x, w, out, n, k);
}

}  // namespace

absl::Status LaunchGemv(const Tensor& x, const Tensor& w, const Tensor& out, cudaStream_t stream) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  return DispatchFloat(x.dtype(), "x", [&](auto xt) -> absl::Status {
    using T = typename decltype(xt)::type;
    return DispatchFloat(out.dtype(), "out", [&](auto ot) -> absl::Status {
      using O = typename decltype(ot)::type;
      const T* xp = static_cast<const T*>(x.raw_data());
      const T* wp = static_cast<const T*>(w.raw_data());
      O* op = static_cast<O*>(out.raw_data());
      switch (m) {
        case 1: return LaunchGemvRows<T, O, 1>(xp, wp, op, n, k, stream);
        case 2: return LaunchGemvRows<T, O, 2>(xp, wp, op, n, k, stream);
        case 3: return LaunchGemvRows<T, O, 3>(xp, wp, op, n, k, stream);
        case 4: return LaunchGemvRows<T, O, 4>(xp, wp, op, n, k, stream);
        case 5: return LaunchGemvRows<T, O, 5>(xp, wp, op, n, k, stream);
        case 6: return LaunchGemvRows<T, O, 6>(xp, wp, op, n, k, stream);
        case 7: return LaunchGemvRows<T, O, 7>(xp, wp, op, n, k, stream);
        case 8: return LaunchGemvRows<T, O, 8>(xp, wp, op, n, k, stream);
        default:
          return absl::InternalError(absl::StrCat("Matmul: GEMV launched for M=", m));
      }
    });
  });
}

}  // namespace seam::kernels::cuda
